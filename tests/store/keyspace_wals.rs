//! WALs shared by keyspaces: a WAL goes once every keyspace with writes in it has flushed them,
//! a quiet keyspace does not keep old WALs alive past `max_total_wal_size`, and a keyspace whose
//! memtable began in a WAL since removed still recovers its writes.

use crate::common::scratch;
use std::path::Path;

use siftdb::{Db, Options, Ticker, WriteBatch};

fn wal_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .map(|e| e.metadata().map_or(0, |m| m.len()))
        .sum()
}

fn value(i: u32) -> Vec<u8> {
    format!("value-{i:08}-{}", "x".repeat(90)).into_bytes()
}

/// A keyspace written once and then left alone would pin the WAL of that write forever; the
/// WAL limit flushes it, so the WALs on disk stay near the limit however much the busy keyspace
/// writes.
#[test]
fn a_quiet_keyspace_does_not_keep_old_wals() {
    let dir = scratch();
    let limit = 256 << 10;
    let options = Options::default()
        .write_buffer_size(64 << 10)
        .max_total_wal_size(limit);
    let db = Db::open(dir.path(), options).unwrap();
    let quiet = db.keyspace("quiet").unwrap();
    quiet.put(b"lonely", b"write").unwrap();
    let mut most = 0;
    for i in 0..40_000u32 {
        db.put(i.to_be_bytes(), value(i)).unwrap();
        if i % 1000 == 0 {
            most = most.max(wal_bytes(dir.path()));
        }
    }
    // The limit, plus what the frozen memtables still waiting for their flush hold.
    assert!(
        most < limit + 4 * (64 << 10),
        "the WALs grew to {most} bytes with a limit of {limit}"
    );
    assert!(quiet.statistics().ticker(Ticker::Flushes) >= 1);
    drop((quiet, db));
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(
        db.keyspace("quiet").unwrap().get(b"lonely").unwrap(),
        Some(b"write".to_vec())
    );
    assert_eq!(
        db.get(39_999u32.to_be_bytes()).unwrap(),
        Some(value(39_999))
    );
}

/// A keyspace stays empty while the WAL its memtable began in is flushed away by the others;
/// then it is written, and the others flush again. Its writes are in later WALs only: the
/// store must neither lose track of them nor fail looking for the removed WAL.
#[test]
fn a_keyspace_written_after_its_first_wal_went_keeps_its_writes() {
    let dir = scratch();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let late = db.keyspace("late").unwrap();
    let busy = db.keyspace("busy").unwrap();
    for round in 0..3u32 {
        busy.put(round.to_be_bytes(), b"busy").unwrap();
        busy.flush().unwrap();
    }
    late.put(b"k", b"late").unwrap();
    busy.put(b"more", b"busy").unwrap();
    busy.flush().unwrap();
    db.put(b"default", b"d").unwrap();
    db.flush().unwrap();
    // Every flush succeeded: no background error stops writes.
    let mut batch = WriteBatch::new();
    batch
        .put_in(&late, b"k2", b"late2")
        .put_in(&busy, b"b2", b"busy2");
    db.write(batch).unwrap();
    drop((late, busy, db));
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let late = db.keyspace("late").unwrap();
    assert_eq!(late.get(b"k").unwrap(), Some(b"late".to_vec()));
    assert_eq!(late.get(b"k2").unwrap(), Some(b"late2".to_vec()));
    assert_eq!(
        db.keyspace("busy").unwrap().get(b"b2").unwrap(),
        Some(b"busy2".to_vec())
    );
    assert_eq!(db.get(b"default").unwrap(), Some(b"d".to_vec()));
}

/// After a flush of one keyspace, the WAL it was written in stays while another keyspace still
/// holds unflushed writes in it, and those writes survive a reopen that replays it.
#[test]
fn a_wal_stays_while_another_keyspace_needs_it() {
    let dir = scratch();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let a = db.keyspace("a").unwrap();
    let b = db.keyspace("b").unwrap();
    let mut batch = WriteBatch::new();
    batch.put_in(&a, b"x", b"in a").put_in(&b, b"x", b"in b");
    db.write(batch).unwrap();
    a.flush().unwrap(); // a's write is in a table; b's only in the WAL
    drop((a, b, db));
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(
        db.keyspace("a").unwrap().get(b"x").unwrap(),
        Some(b"in a".to_vec())
    );
    assert_eq!(
        db.keyspace("b").unwrap().get(b"x").unwrap(),
        Some(b"in b".to_vec())
    );
}

/// A batch written to two keyspaces, unsynced, after which one keyspace's memtable fills and is
/// flushed in the background: the table holds that keyspace's half of the batch, durably, so the
/// flush first makes durable the WAL holding the other half. A power cut that loses everything
/// unsynced then keeps the batch whole.
#[test]
fn a_flush_of_one_keyspace_never_keeps_half_a_batch_through_a_power_cut() {
    use siftdb::fault_injection::{FaultInjector, PowerCut};
    let root = scratch();
    let dir = root.path().join("db");
    let faults = FaultInjector::new(&dir).unwrap();
    let options = || {
        Options::default()
            .write_buffer_size(4096)
            .fault_injector(faults.clone())
    };
    let db = Db::open(&dir, options()).unwrap();
    let (busy, quiet) = (db.keyspace("busy").unwrap(), db.keyspace("quiet").unwrap());
    let mut batch = WriteBatch::new();
    batch.put_in(&busy, b"pair", b"busy half");
    batch.put_in(&quiet, b"pair", b"quiet half");
    db.write(batch).unwrap();
    // Fill `busy` until its memtable (holding its half of the batch) is frozen and flushed.
    let mut i = 0u32;
    while busy.statistics().ticker(Ticker::Flushes) == 0 {
        busy.put(i.to_be_bytes(), value(i)).unwrap();
        i += 1;
        if i.is_multiple_of(64) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    drop((busy, quiet, db));
    faults.power_cut(PowerCut::strict()).unwrap();
    let db = Db::open(&dir, options()).unwrap();
    let (busy, quiet) = (db.keyspace("busy").unwrap(), db.keyspace("quiet").unwrap());
    assert_eq!(busy.get(b"pair").unwrap(), Some(b"busy half".to_vec()));
    assert_eq!(quiet.get(b"pair").unwrap(), Some(b"quiet half".to_vec()));
}
