//! Whole-store behaviour on real files: put/get/delete/overwrite across flush, compaction and
//! reopen; locking; bad input.

use crate::common;
use common::scratch;
use common::{files_with_ext, tables_per_level};
use siftdb::{Db, Error, Filter, Options, Ticker, WriteBatch, WriteOptions};

fn small_options() -> Options {
    // Small buffers and tables so a few thousand keys exercise flushes and several levels.
    Options::default()
        .write_buffer_size(64 << 10)
        .target_file_size(32 << 10)
        .max_bytes_for_level_base(128 << 10)
        .block_cache_bytes(1 << 20)
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    format!("value-{i}-{round}-{}", "x".repeat((i % 50) as usize)).into_bytes()
}

#[test]
fn put_get_delete_overwrite_across_flush_compaction_and_reopen() {
    let dir = scratch();
    let n = 5000;
    {
        let db = Db::open(dir.path(), small_options()).unwrap();
        for i in 0..n {
            db.put(key(i), value(i, 0)).unwrap();
        }
        db.flush().unwrap();
        for i in (0..n).step_by(3) {
            db.put(key(i), value(i, 1)).unwrap();
        }
        for i in (0..n).step_by(5) {
            db.delete(key(i)).unwrap();
        }
        let check = |db: &Db| {
            for i in 0..n {
                let want = if i % 5 == 0 {
                    None
                } else if i % 3 == 0 {
                    Some(value(i, 1))
                } else {
                    Some(value(i, 0))
                };
                assert_eq!(db.get(key(i)).unwrap(), want, "key {i}");
            }
        };
        check(&db);
        db.compact().unwrap();
        check(&db);
        let levels = tables_per_level(&db);
        assert_eq!(levels[0], 0, "after compact L0 is empty: {levels:?}");
    }
    // Reopen: everything is in tables now.
    let db = Db::open(dir.path(), small_options()).unwrap();
    for i in 0..n {
        let got = db.get(key(i)).unwrap();
        assert_eq!(got.is_some(), i % 5 != 0, "key {i}");
    }
    // A scan sees exactly the live keys, in order.
    let keys: Vec<Vec<u8>> = db.iter().map(|r| r.unwrap().0).collect();
    let want: Vec<Vec<u8>> = (0..n).filter(|i| i % 5 != 0).map(key).collect();
    assert_eq!(keys, want);
}

#[test]
fn reopen_without_flush_recovers_from_the_wal() {
    let dir = scratch();
    {
        let db = Db::open(dir.path(), Options::default()).unwrap();
        let mut b = WriteBatch::new();
        b.put(b"a", b"1").put(b"b", b"2").delete(b"a");
        db.write_opt(b, &WriteOptions { sync: true }).unwrap();
        db.put(b"", b"empty key").unwrap();
        db.put(b"empty value", b"").unwrap();
    }
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.get(b"a").unwrap(), None);
    assert_eq!(db.get(b"b").unwrap(), Some(b"2".to_vec()));
    assert_eq!(db.get(b"").unwrap(), Some(b"empty key".to_vec()));
    assert_eq!(db.get(b"empty value").unwrap(), Some(Vec::new()));
    // Writes after recovery get fresh sequence numbers: newer than what was recovered.
    db.put(b"b", b"3").unwrap();
    drop(db);
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.get(b"b").unwrap(), Some(b"3".to_vec()));
}

#[test]
fn a_second_open_of_a_locked_directory_fails() {
    let dir = scratch();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    match Db::open(dir.path(), Options::default()) {
        Err(Error::Locked(p)) => assert_eq!(p, dir.path()),
        other => panic!("expected Locked, got {:?}", other.err()),
    }
    drop(db);
    Db::open(dir.path(), Options::default()).unwrap();
}

#[test]
fn bad_input_gets_a_clear_error() {
    let dir = scratch();
    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"not a database").unwrap();
    assert!(matches!(
        Db::open(&file, Options::default()),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        Db::open(
            dir.path().join("missing"),
            Options::default().create_if_missing(false)
        ),
        Err(Error::InvalidArgument(_))
    ));
    let db = Db::open(dir.path().join("db"), Options::default()).unwrap();
    assert!(matches!(
        db.put(vec![0u8; siftdb::MAX_KEY_BYTES + 1], b"v"),
        Err(Error::InvalidArgument(_))
    ));
    db.put(vec![7u8; siftdb::MAX_KEY_BYTES], b"v").unwrap();
    assert_eq!(
        db.get(vec![7u8; siftdb::MAX_KEY_BYTES]).unwrap(),
        Some(b"v".to_vec())
    );
    // Nothing of the refused write went in.
    assert_eq!(db.get(vec![0u8; siftdb::MAX_KEY_BYTES + 1]).unwrap(), None);
}

#[test]
fn every_filter_layout_reads_back_after_flush_and_compaction() {
    for filter in [
        Filter::none(),
        Filter::block_based(10.0),
        Filter::full(10.0),
        Filter::partitioned(10.0).partition_bytes(256),
    ] {
        let dir = scratch();
        let db = Db::open(dir.path(), small_options().filter(filter.clone())).unwrap();
        for i in 0..3000 {
            db.put(key(i), value(i, 0)).unwrap();
        }
        db.flush().unwrap();
        for i in 0..3000 {
            assert_eq!(
                db.get(key(i)).unwrap(),
                Some(value(i, 0)),
                "{filter:?} key {i}"
            );
        }
        db.compact().unwrap();
        for i in 0..3000 {
            assert_eq!(
                db.get(key(i)).unwrap(),
                Some(value(i, 0)),
                "{filter:?} key {i}"
            );
        }
        assert_eq!(db.get(b"absent").unwrap(), None);
    }
}

/// More live tables than `max_open_files` allows pinned: the readers beyond the pins go through
/// the table cache's LRU, every Get and scan still answers right, and after a full compaction the
/// replaced tables' files are gone (their pinned readers closed with them).
#[test]
fn more_tables_than_open_files_read_right_and_compacted_files_are_deleted() {
    let dir = scratch();
    let opts = || {
        small_options()
            .max_open_files(16)
            .target_file_size(4 << 10)
            .max_bytes_for_level_base(64 << 20)
    };
    let n = 12000;
    let db = Db::open(dir.path(), opts()).unwrap();
    for i in 0..n {
        db.put(key(i), value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    let tables = |dir: &std::path::Path| files_with_ext(dir, "sst").len();
    db.compact().unwrap();
    let before = tables(dir.path());
    assert!(
        before > 16,
        "only {before} tables: the test needs more than max_open_files"
    );
    for round in 0..2 {
        for i in (0..n).rev() {
            assert_eq!(
                db.get(key(i)).unwrap(),
                Some(value(i, 0)),
                "round {round} key {i}"
            );
        }
        assert_eq!(db.get(b"zzz").unwrap(), None);
    }
    assert_eq!(db.iter().count(), n as usize);
    // Rewrite everything: compaction replaces every table, and the old files must go even though
    // Gets pinned their readers.
    for i in 0..n {
        db.put(key(i), value(i, 1)).unwrap();
    }
    db.compact().unwrap();
    for i in (0..n).step_by(7) {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i, 1)), "key {i}");
    }
    let live: usize = tables_per_level(&db).iter().sum();
    assert_eq!(tables(dir.path()), live, "obsolete table files left behind");
}

/// `get_pinned` returns what `get` returns, from a memtable, an L0 table and a compacted tree,
/// at the latest sequence and at a snapshot; a pinned value stays intact after its table is
/// compacted away and its block evicted.
#[test]
fn pinned_values_equal_copied_ones_and_outlive_their_tables() {
    let dir = scratch();
    let db = Db::open(
        dir.path(),
        Options::default()
            .write_buffer_size(64 << 10)
            .block_cache_bytes(64 << 10),
    )
    .unwrap();
    let value = |i: u32, round: u32| format!("{round}:{}", "v".repeat((i % 300) as usize));
    let check = |db: &Db, round: u32, what: &str| {
        for i in (0..2000u32).step_by(13) {
            let k = format!("key{i:05}");
            let pinned = db.get_pinned(&k).unwrap();
            assert_eq!(
                pinned.as_deref(),
                db.get(&k).unwrap().as_deref(),
                "{what}: key {i}"
            );
            assert_eq!(
                pinned.as_deref(),
                Some(value(i, round).as_bytes()),
                "{what}"
            );
        }
        assert!(db.get_pinned(b"absent").unwrap().is_none());
    };
    for i in 0..2000u32 {
        db.put(format!("key{i:05}"), value(i, 0)).unwrap();
    }
    check(&db, 0, "memtable and L0");
    db.flush().unwrap();
    check(&db, 0, "flushed");
    let snapshot = db.snapshot();
    let kept = db.get_pinned(b"key00299").unwrap().unwrap();
    for i in 0..2000u32 {
        db.put(format!("key{i:05}"), value(i, 1)).unwrap();
    }
    db.compact().unwrap();
    check(&db, 1, "compacted");
    for i in (0..2000u32).step_by(17) {
        let k = format!("key{i:05}");
        assert_eq!(
            db.get_pinned_at(&snapshot, &k).unwrap().as_deref(),
            Some(value(i, 0).as_bytes()),
            "at the snapshot: key {i}"
        );
    }
    // The value read before the compaction still reads right: its block lives with it.
    assert_eq!(&*kept, value(299, 0).as_bytes());
}

/// The write-path counters add up: user bytes are exactly the keys and values written, the stall
/// time is the sum of its causes, and `siftdb.stats` shows the work per level with the store's
/// write amplification.
#[test]
fn write_amplification_and_stalls_are_counted_by_level_and_cause() {
    // On the disk, not tmpfs: writers stall behind flushes that wait for a real fsync.
    let dir = tempfile::tempdir().unwrap();
    // Tiny memtables, one frozen at most, and a flush that fsyncs each: writers outrun the flush
    // thread and stall.
    let opts = Options::default()
        .write_buffer_size(8 << 10)
        .target_file_size(8 << 10)
        .max_bytes_for_level_base(32 << 10)
        .level0_compaction_trigger(2)
        .max_immutable_memtables(1);
    let db = Db::open(dir.path(), opts).unwrap();
    let mut user_bytes = 0u64;
    let mut i = 0u32;
    while i < 20_000 || (db.statistics().ticker(Ticker::WriteStallMicros) == 0 && i < 1_000_000) {
        let k = format!("key{:08}", i.wrapping_mul(2_654_435_761) % 1_000_000);
        let v = format!("v{i}");
        user_bytes += (k.len() + v.len()) as u64;
        db.put(&k, &v).unwrap();
        i += 1;
    }
    db.delete("key00000001").unwrap();
    user_bytes += "key00000001".len() as u64;
    db.compact().unwrap();
    let s = db.statistics();
    assert_eq!(s.ticker(Ticker::UserBytesWritten), user_bytes);
    let causes = s.ticker(Ticker::WriteStallL0SlowdownMicros)
        + s.ticker(Ticker::WriteStallL0StopMicros)
        + s.ticker(Ticker::WriteStallMemtablesMicros);
    assert_eq!(s.ticker(Ticker::WriteStallMicros), causes);
    assert!(causes > 0, "writers never stalled: {s}");
    let report = db.property("siftdb.stats").unwrap();
    // A row of flushes into L0 and of compactions into L1, and a sum of every job.
    for row in ["L0 flush", "L1 ", "sum "] {
        assert!(
            report.lines().any(|l| l.starts_with(row)),
            "{row}: {report}"
        );
    }
    // Every job is in the rows, and the write amplification is the counters'. A background
    // compaction may still finish between reading the report and the counters: then read both
    // again once it has.
    let sum_of_jobs = |report: &str| -> u64 {
        report
            .lines()
            .find(|l| l.starts_with("sum "))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse().ok())
            .unwrap()
    };
    for attempt in 0.. {
        let report = db.property("siftdb.stats").unwrap();
        let s = db.statistics();
        let jobs = s.ticker(Ticker::Flushes) + s.ticker(Ticker::Compactions);
        let amp = s.ticker(Ticker::TableBytesWritten) as f64 / user_bytes as f64;
        assert!(amp > 1.0, "{report}");
        let amp_line = format!("write amplification: {amp:.2} ");
        if sum_of_jobs(&report) == jobs && report.contains(&amp_line) {
            break;
        }
        assert!(attempt < 100, "{jobs} jobs counted: {report}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
