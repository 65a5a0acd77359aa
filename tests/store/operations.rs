//! The store operations an application needs besides reads and writes: `sync_wal`, `close`,
//! `open_read_only`, `checkpoint`, `destroy`, and background failures kept as typed errors.
//!
//! Durability claims are checked on the fault-injection layer (`siftdb::fault_injection`), whose
//! strict power cut keeps only what was fsynced; `tests/sigkill/crash.rs` runs `sync_wal` under real
//! SIGKILLs.

use crate::common;
use common::gate::{gated_options, Gate};
use common::{copy_dir, file_names, names_with_ext, scratch};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use siftdb::fault_injection::{FaultInjector, OpKind, OpSite, PowerCut};
use siftdb::{BackgroundError, Db, Error, Options, Ticker, WriteBatch, WriteOptions};

fn key(i: u64) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    let mut v = format!("value-{i}-").into_bytes();
    v.resize(40 + (i % 90) as usize, b'a' + (i % 26) as u8);
    v
}

/// The operation index a value was written by.
fn value_index(v: &[u8]) -> u64 {
    let s = std::str::from_utf8(v).unwrap();
    s.split('-').nth(1).unwrap().parse().unwrap()
}

/// Tiny memtables, tables and levels: flushes, WAL switches and compactions every few hundred
/// writes.
fn small() -> Options {
    Options::default()
        .write_buffer_size(16 << 10)
        .target_file_size(8 << 10)
        .max_bytes_for_level_base(32 << 10)
        .level0_compaction_trigger(2)
        .block_size(1024)
}

/// Every entry of `db`, in key order.
fn contents(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.iter().map(Result::unwrap).collect()
}

/// The I/O error kind of the `EIO` the fault-injection layer injects.
fn eio_kind() -> std::io::ErrorKind {
    std::io::Error::from_raw_os_error(5).kind()
}

// ---------------------------------------------------------------------------------------------
// A logger that keeps every record, so tests can see what the store reported.

static RECORDS: Mutex<Vec<(log::Level, String)>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, record: &log::Record<'_>) {
        RECORDS
            .lock()
            .unwrap()
            .push((record.level(), record.args().to_string()));
    }
    fn flush(&self) {}
}

/// Installs the capturing logger (once per test binary), at debug level.
fn capture_logs() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        log::set_logger(&Capture).unwrap();
        log::set_max_level(log::LevelFilter::Debug);
    });
}

/// The records logged so far that mention `dir` (after `capture_logs`).
fn logs_about(dir: &Path) -> Vec<(log::Level, String)> {
    let name = dir.display().to_string();
    RECORDS
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, m)| m.contains(&name))
        .cloned()
        .collect()
}

/// The writes of operation `i` in the tests that write numbered operations: put `key(i % KEYS)`,
/// and every seventh operation also delete another key.
const KEYS: u64 = 400;

fn operation(i: u64) -> WriteBatch {
    let mut b = WriteBatch::new();
    b.put(key(i % KEYS), value(i));
    if i % 7 == 3 {
        b.delete(key((i + KEYS / 2) % KEYS));
    }
    b
}

/// The store's contents after operations `0..m`.
fn model_after(m: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut model = BTreeMap::new();
    for i in 0..m {
        model.insert(key(i % KEYS), value(i));
        if i % 7 == 3 {
            model.remove(&key((i + KEYS / 2) % KEYS));
        }
    }
    model.into_iter().collect()
}

/// How many operations the contents are the state after: one past the newest value's operation
/// (operation `i` always leaves its own put visible, since its delete is of another key). Panics
/// unless the contents are exactly the state after that prefix.
fn prefix_of(entries: &[(Vec<u8>, Vec<u8>)], what: &str) -> u64 {
    let m = entries
        .iter()
        .map(|(_, v)| value_index(v) + 1)
        .max()
        .unwrap_or(0);
    let model = model_after(m);
    if entries != model.as_slice() {
        let diff = model
            .iter()
            .filter(|e| !entries.contains(e))
            .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
            .take(5)
            .collect::<Vec<_>>();
        panic!(
            "{what}: not the state after operations 0..{m} ({} entries, model {}; differing: \
             {diff:?})",
            entries.len(),
            model.len()
        );
    }
    m
}

/// Every file of `dir` with its bytes.
fn dir_bytes(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    file_names(dir)
        .into_iter()
        .map(|n| {
            let bytes = std::fs::read(dir.join(&n)).unwrap();
            (n, bytes)
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// sync_wal

/// How the test makes the writes before the cut durable.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Cover {
    SyncWal,
    EmptySyncedBatch,
    Nothing,
}

/// Unsynced writes spread over several WALs (the flushes wait at a gate, as slow flushes do, so
/// older WALs hold unsynced records of memtables not yet tables), then `sync_wal`, then more
/// unsynced writes, then a power cut that keeps only fsynced bytes: every write before the
/// `sync_wal` is there. An empty batch written with `sync: true` does the same. Without either
/// (the control), the same cut loses them, so the test can tell.
#[test]
fn sync_wal_makes_every_earlier_write_survive_a_strict_power_cut() {
    for cover in [Cover::SyncWal, Cover::EmptySyncedBatch, Cover::Nothing] {
        let dir = scratch();
        let faults = FaultInjector::new(dir.path()).unwrap();
        let gate = Arc::new(Gate::default());
        gate.close();
        let db = Db::open(dir.path(), gated_options(&gate, &faults)).unwrap();
        let (covered, after) = (100, 10);
        for i in 0..covered {
            db.write(operation(i)).unwrap();
        }
        let wals = names_with_ext(dir.path(), "log").len();
        assert!(
            wals >= 3,
            "{cover:?}: the test needs older WALs, has {wals}"
        );
        let syncs = db.statistics().ticker(Ticker::WalSyncs);
        match cover {
            Cover::SyncWal => db.sync_wal().unwrap(),
            Cover::EmptySyncedBatch => db
                .write_opt(WriteBatch::new(), &WriteOptions { sync: true })
                .unwrap(),
            Cover::Nothing => {}
        }
        let synced = db.statistics().ticker(Ticker::WalSyncs) - syncs;
        assert_eq!(synced, u64::from(cover != Cover::Nothing), "{cover:?}");
        // Nothing left to sync: a second call syncs nothing.
        if cover == Cover::SyncWal {
            db.sync_wal().unwrap();
            assert_eq!(db.statistics().ticker(Ticker::WalSyncs) - syncs, 1);
        }
        for i in covered..covered + after {
            db.write(operation(i)).unwrap();
        }
        faults.kill();
        gate.open();
        drop(db);
        let report = faults.power_cut(PowerCut::strict()).unwrap();
        let db = Db::open(dir.path(), gated_options(&gate, &faults)).unwrap();
        let m = prefix_of(&contents(&db), &format!("{cover:?}"));
        if cover == Cover::Nothing {
            assert!(
                m < covered,
                "control: a strict power cut kept {m} unsynced operations ({report:?})"
            );
        } else {
            assert!(
                m >= covered,
                "{cover:?}: only {m} of the {covered} operations before it survived ({report:?})"
            );
            assert!(m <= covered + after);
        }
    }
}

/// `sync_wal` from one thread while another writes, flushes and compactions running: after a
/// strict power cut, every write acknowledged before the start of the last `sync_wal` that
/// returned is there, and the store is the state after a prefix of the writes.
#[test]
fn sync_wal_amid_writes_flushes_and_compactions() {
    for round in 0..3u64 {
        let dir = scratch();
        let faults = FaultInjector::new(dir.path()).unwrap();
        let db = Arc::new(Db::open(dir.path(), small().fault_injector(faults.clone())).unwrap());
        let acked = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (db, acked, stop) = (Arc::clone(&db), Arc::clone(&acked), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut i = 0;
                while !stop.load(Ordering::SeqCst) && db.write(operation(i)).is_ok() {
                    i += 1;
                    acked.store(i, Ordering::SeqCst);
                }
            })
        };
        let mut durable = 0;
        let mut syncs = 0;
        let deadline = Instant::now() + Duration::from_millis(150 + 100 * round);
        // A busy machine can hold the writer back: the loop runs on until a sync covered writes
        // and the writer has acknowledged more after it, so the cut has something to lose.
        let give_up = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline || durable == 0 {
            let before = acked.load(Ordering::SeqCst);
            db.sync_wal().unwrap();
            durable = before;
            syncs += 1;
            std::thread::sleep(Duration::from_millis(3));
            if Instant::now() > give_up {
                break;
            }
        }
        while acked.load(Ordering::SeqCst) <= durable && Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(1));
        }
        faults.kill();
        stop.store(true, Ordering::SeqCst);
        writer.join().unwrap();
        let written = acked.load(Ordering::SeqCst);
        drop(Arc::try_unwrap(db).ok().unwrap());
        faults.power_cut(PowerCut::strict()).unwrap();
        let db = Db::open(dir.path(), small()).unwrap();
        let m = prefix_of(&contents(&db), &format!("round {round}"));
        assert!(
            m >= durable,
            "round {round}: {durable} operations were acknowledged before a sync_wal that \
             returned, only {m} survived"
        );
        assert!(
            durable > 0 && written > durable,
            "round {round}: nothing to test"
        );
        eprintln!(
            "round {round}: {written} operations, {syncs} sync_wal calls, {durable} covered, \
             {m} recovered"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// close, and background failures as typed errors

/// A flush whose table fsync fails with `EIO`: the failure is the store's background error,
/// typed (the I/O kind and the original error survive), returned to `flush`, to every later
/// write and by `close`, logged at error level as it happens, and nothing acknowledged is lost.
#[test]
fn close_reports_an_injected_background_error_with_its_io_kind() {
    capture_logs();
    let dir = scratch();
    let faults = FaultInjector::new(dir.path()).unwrap();
    let db = Db::open(dir.path(), small().fault_injector(faults.clone())).unwrap();
    faults.fail_after(
        0,
        Box::new(|s: &OpSite| s.kind == OpKind::Sync && s.file.ends_with(".sst")),
    );
    for i in 0..50 {
        db.write(operation(i)).unwrap();
    }
    let err = db.flush().unwrap_err();
    let injected = faults.injected();
    assert_eq!(injected.len(), 1);
    let table = &injected[0].file;
    let Error::Background(b) = &err else {
        panic!("flush: {err:?}")
    };
    // Typed: the kind and the original error.
    assert_eq!(b.io_kind(), Some(eio_kind()));
    let Some(Error::Io(cause)) = b.cause() else {
        panic!("cause: {:?}", b.cause())
    };
    assert_eq!(cause.kind(), eio_kind());
    assert!(cause.to_string().contains(table.as_str()), "{cause}");
    let source = std::error::Error::source(&err).unwrap();
    assert_eq!(source.to_string(), b.to_string());
    assert!(std::error::Error::source(source).is_some(), "the cause");
    // And still a string, as the `String` it replaced.
    let s: &BackgroundError = b;
    assert!(
        s.contains(table.as_str()) && s.contains("Input/output error"),
        "{s}"
    );
    assert_eq!(format!("{s}"), s.to_string());
    let text: String = s.as_str().to_owned();
    assert_eq!(*s, *text.as_str()); // BackgroundError == str
    assert_eq!(*s, text.as_str()); // == &str
    assert_eq!(*s, text); // == String
    assert_eq!(text, *s); // String == BackgroundError
    assert_eq!(String::from(s.clone()), s.as_str());
    // Writes stop with the same error.
    let Err(Error::Background(w)) = db.put(b"after", b"failure") else {
        panic!("writes must stop")
    };
    assert_eq!(w, *s);
    assert_eq!(w.io_kind(), Some(eio_kind()));
    // A checkpoint cannot flush: it fails and removes the directories it created, no more.
    let parent = dir.path().with_extension("ckpt");
    let ckpt = parent.join("a").join("b");
    assert!(matches!(db.checkpoint(&ckpt), Err(Error::Background(_))));
    assert!(!parent.exists());
    std::fs::create_dir(&parent).unwrap();
    assert!(matches!(db.checkpoint(&ckpt), Err(Error::Background(_))));
    assert!(parent.exists() && file_names(&parent).is_empty());
    std::fs::remove_dir(&parent).unwrap();
    // Logged as it happened, naming the table.
    let logs = logs_about(dir.path());
    assert!(
        logs.iter()
            .any(|(level, m)| *level == log::Level::Error && m.contains(table.as_str())),
        "{logs:?}"
    );
    // close reports it.
    let Err(Error::Background(c)) = db.close() else {
        panic!("close must report the background error")
    };
    assert_eq!(c.io_kind(), Some(eio_kind()));
    assert_eq!(c, *s);
    // Nothing acknowledged was lost.
    let db = Db::open(dir.path(), small()).unwrap();
    assert_eq!(prefix_of(&contents(&db), "reopen"), 50);
    db.close().unwrap();
}

/// A failed WAL write: the writer gets the I/O error, later writes the background error with the
/// same kind, and `close` reports it.
#[test]
fn close_reports_a_failed_wal_write() {
    let dir = scratch();
    let faults = FaultInjector::new(dir.path()).unwrap();
    let db = Db::open(dir.path(), small().fault_injector(faults.clone())).unwrap();
    db.write(operation(0)).unwrap();
    faults.fail_after(
        0,
        Box::new(|s: &OpSite| s.kind == OpKind::Write && s.file.ends_with(".log")),
    );
    let Err(Error::Io(e)) = db.write(operation(1)) else {
        panic!("the failed WAL write must be reported")
    };
    assert_eq!(e.kind(), eio_kind());
    let Err(Error::Background(b)) = db.write(operation(1)) else {
        panic!("writes must stop")
    };
    assert_eq!(b.io_kind(), Some(eio_kind()));
    assert!(
        matches!(db.sync_wal(), Err(Error::Io(_))),
        "the WAL is poisoned"
    );
    let Err(Error::Background(c)) = db.close() else {
        panic!("close must report it")
    };
    assert_eq!(c.io_kind(), Some(eio_kind()));
    let db = Db::open(dir.path(), small()).unwrap();
    assert_eq!(prefix_of(&contents(&db), "reopen"), 1);
}

/// `close` waits for the flush in flight (held at a gate) and returns once it is installed: after
/// a strict power cut the flushed memtable's writes are there, although none was synced.
#[test]
fn close_waits_for_the_flush_in_flight_and_is_ok_after_a_clean_life() {
    let dir = scratch();
    let faults = FaultInjector::new(dir.path()).unwrap();
    let gate = Arc::new(Gate::default());
    gate.close();
    let db = Db::open(dir.path(), gated_options(&gate, &faults)).unwrap();
    for i in 0..60 {
        db.write(operation(i)).unwrap();
    }
    gate.wait_arrival();
    let closing = std::thread::spawn(move || db.close());
    std::thread::sleep(Duration::from_millis(150));
    assert!(
        !closing.is_finished(),
        "close returned with a flush in flight"
    );
    gate.open();
    closing.join().unwrap().unwrap();
    assert!(!names_with_ext(dir.path(), "sst").is_empty());
    faults.power_cut(PowerCut::strict()).unwrap();
    let db = Db::open(dir.path(), gated_options(&gate, &faults)).unwrap();
    let m = prefix_of(&contents(&db), "after close and a power cut");
    assert!(
        m > 0,
        "the flush close waited for was not installed durably"
    );
    db.close().unwrap();
}

/// Flushes and compactions are logged at debug level with their tables, levels, bytes and time.
#[test]
fn flushes_and_compactions_are_logged_at_debug_level() {
    capture_logs();
    let dir = scratch();
    let db = Db::open(dir.path(), small()).unwrap();
    for i in 0..4000 {
        db.write(operation(i)).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while db.statistics().ticker(Ticker::Compactions) == 0 {
        assert!(Instant::now() < deadline, "no compaction ran");
        std::thread::sleep(Duration::from_millis(5));
    }
    db.close().unwrap();
    let logs = logs_about(dir.path());
    let debug = |what: &str| {
        logs.iter()
            .any(|(level, m)| *level == log::Level::Debug && m.contains(what) && m.contains(" ms"))
    };
    assert!(debug("flush of the memtable of WAL"), "{logs:?}");
    assert!(debug("into L0 table"), "{logs:?}");
    assert!(debug("compaction of L0 → L1"), "{logs:?}");
    assert!(
        logs.iter().all(|(level, _)| *level > log::Level::Warn),
        "{logs:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// open_read_only

/// A store with tables on several levels and writes still only in its WAL (the writer was dropped
/// without a flush), built from operations `0..n`.
fn build_store(dir: &Path, n: u64) {
    let db = Db::open(dir, small()).unwrap();
    for i in 0..n - 60 {
        db.write(operation(i)).unwrap();
    }
    db.compact().unwrap();
    for i in n - 60..n {
        db.write(operation(i)).unwrap();
    }
    db.close().unwrap();
    assert!(!names_with_ext(dir, "sst").is_empty());
}

/// A reader is refused beside a writer; readers share the store; a writer is refused while any
/// reader is open, and opens once the last is gone.
#[test]
fn readers_share_a_store_and_exclude_a_writer() {
    let dir = scratch();
    let n = 1500;
    build_store(dir.path(), n);
    let db = Db::open(dir.path(), small()).unwrap();
    assert!(matches!(
        Db::open_read_only(dir.path(), small()),
        Err(Error::Locked(_))
    ));
    db.close().unwrap();
    let a = Db::open_read_only(dir.path(), small()).unwrap();
    let b = Db::open_read_only(dir.path(), Options::default()).unwrap();
    assert!(a.is_read_only() && b.is_read_only());
    // Both read the whole store, the WAL's writes included, and concurrently.
    let model = model_after(n);
    std::thread::scope(|s| {
        for db in [&a, &b] {
            let model = &model;
            s.spawn(move || {
                assert_eq!(&contents(db), model);
                for (k, v) in model {
                    assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
                }
            });
        }
    });
    assert!(matches!(
        Db::open(dir.path(), small()),
        Err(Error::Locked(_))
    ));
    drop(a);
    assert!(
        matches!(Db::open(dir.path(), small()), Err(Error::Locked(_))),
        "a reader is still open"
    );
    b.close().unwrap();
    let db = Db::open(dir.path(), small()).unwrap();
    assert_eq!(contents(&db), model);
}

/// A read-only open writes nothing: no file is created, changed or removed (the fault-injection
/// layer sees no operation, and every file keeps its bytes); every write is refused with
/// `Error::ReadOnly`; reads see everything the last writer acknowledged.
#[test]
fn a_read_only_store_writes_nothing_and_refuses_writes() {
    let dir = scratch();
    let n = 1500;
    build_store(dir.path(), n);
    let before = dir_bytes(dir.path());
    assert!(before.keys().any(|f| f.ends_with(".log")));
    let faults = FaultInjector::new(dir.path()).unwrap();
    let db = Db::open_read_only(dir.path(), small().fault_injector(faults.clone())).unwrap();
    assert_eq!(contents(&db), model_after(n));
    let read_only = |r: siftdb::Result<()>, what: &str| {
        assert!(matches!(r, Err(Error::ReadOnly(_))), "{what}: {r:?}");
    };
    read_only(db.put(b"k", b"v"), "put");
    read_only(db.delete(key(0)), "delete");
    read_only(db.write(operation(n)), "write");
    read_only(
        db.write_opt(operation(n), &WriteOptions { sync: true }),
        "synced write",
    );
    read_only(
        db.write_opt(WriteBatch::new(), &WriteOptions { sync: true }),
        "empty synced batch",
    );
    read_only(db.flush(), "flush");
    read_only(db.compact(), "compact");
    let text = db.put(b"k", b"v").unwrap_err().to_string();
    assert!(text.contains("read-only"), "{text}");
    db.sync_wal().unwrap(); // nothing to sync
    assert_eq!(
        contents(&db),
        model_after(n),
        "refused writes changed nothing"
    );
    assert!(db.property("siftdb.stats").is_some());
    db.close().unwrap();
    assert_eq!(
        faults.ops(),
        0,
        "a read-only store went through the file system"
    );
    assert_eq!(
        dir_bytes(dir.path()),
        before,
        "a read-only open changed the directory"
    );
    // A writer then recovers the same store.
    let db = Db::open(dir.path(), small()).unwrap();
    assert_eq!(contents(&db), model_after(n));
}

/// What a read-only open refuses: a missing directory, one that holds no store (and nothing is
/// added to it, not even `LOCK`), a store's files without CURRENT. A store copied without its
/// `LOCK` opens, and the `LOCK` made for it then excludes a writer.
#[test]
fn read_only_open_refusals_and_a_store_without_lock() {
    let root = scratch();
    let missing = root.path().join("missing");
    assert!(matches!(
        Db::open_read_only(&missing, Options::default()),
        Err(Error::InvalidArgument(_))
    ));
    assert!(!missing.exists());
    let empty = root.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert!(matches!(
        Db::open_read_only(&empty, Options::default()),
        Err(Error::InvalidArgument(_))
    ));
    assert!(file_names(&empty).is_empty(), "{:?}", file_names(&empty));

    let store = root.path().join("store");
    build_store(&store, 800);
    let copy = root.path().join("copy");
    copy_dir(&store, &copy); // all but LOCK
    assert!(!copy.join("LOCK").exists());
    let reader = Db::open_read_only(&copy, Options::default()).unwrap();
    assert_eq!(contents(&reader), model_after(800));
    assert!(matches!(
        Db::open(&copy, Options::default()),
        Err(Error::Locked(_))
    ));
    drop(reader);

    std::fs::remove_file(copy.join("CURRENT")).unwrap();
    assert!(matches!(
        Db::open_read_only(&copy, Options::default()),
        Err(Error::Corruption { .. })
    ));
}

// ---------------------------------------------------------------------------------------------
// checkpoint

/// Checkpoints taken while another thread writes, flushes and compactions run. Each holds
/// exactly the state after a prefix `0..m` of the operations, with `m` at least the number
/// acknowledged before the call and at most the number started before it returned; each opens
/// (read-only and as a writer) and reads back through its filters; and the source and the
/// copies then live separate lives.
#[test]
fn checkpoints_taken_while_writes_go_on_hold_a_prefix_covering_every_earlier_write() {
    let root = scratch();
    let src = root.path().join("db");
    let db = Arc::new(Db::open(&src, small()).unwrap());
    let acked = Arc::new(AtomicU64::new(0));
    let started = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, acked, started, stop) = (
            Arc::clone(&db),
            Arc::clone(&acked),
            Arc::clone(&started),
            Arc::clone(&stop),
        );
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                started.store(i + 1, Ordering::SeqCst);
                db.write(operation(i)).unwrap();
                i += 1;
                acked.store(i, Ordering::SeqCst);
            }
        })
    };
    let mut taken = Vec::new();
    for c in 0..6u64 {
        std::thread::sleep(Duration::from_millis(20 + 15 * c));
        let dir = root.path().join(format!("checkpoint{c}"));
        let before = acked.load(Ordering::SeqCst);
        db.checkpoint(&dir).unwrap();
        let after = started.load(Ordering::SeqCst);
        taken.push((dir, before, after));
    }
    stop.store(true, Ordering::SeqCst);
    writer.join().unwrap();
    let total = acked.load(Ordering::SeqCst);
    let compactions = db.statistics().ticker(Ticker::Compactions);
    for (dir, before, after) in &taken {
        let what = dir.display().to_string();
        let names = file_names(dir);
        assert!(
            names
                .iter()
                .all(|n| n.ends_with(".sst") || n.starts_with("MANIFEST-") || n == "CURRENT"),
            "{what}: {names:?}"
        );
        let reader = Db::open_read_only(dir, small()).unwrap();
        let entries = contents(&reader);
        let m = prefix_of(&entries, &what);
        assert!(
            *before <= m && m <= *after,
            "{what}: holds operations 0..{m}; {before} were acknowledged before the call, \
             {after} started before it returned"
        );
        for (k, v) in &entries {
            assert_eq!(reader.get(k).unwrap().as_ref(), Some(v), "{what}");
        }
        drop(reader);
        // A store of its own: writable, and its writes stay its own.
        let copy = Db::open(dir, small()).unwrap();
        copy.put(b"only-in-the-copy", b"1").unwrap();
        copy.compact().unwrap();
        assert_eq!(prefix_of(&contents(&copy)[..entries.len()], &what), m);
        copy.close().unwrap();
        eprintln!("{what}: operations 0..{m} (acknowledged before: {before}, started: {after})");
    }
    assert_eq!(db.get(b"only-in-the-copy").unwrap(), None);
    assert_eq!(prefix_of(&contents(&db), "source"), total);
    eprintln!("{total} operations, {compactions} compactions during the checkpoints");
}

/// A checkpoint of a quiet store: the same contents; its tables are hard links to the source's
/// (same file system); it needs no WAL; the directory must be new (missing parents are created);
/// the copy survives the source's destruction.
#[test]
fn a_checkpoint_links_tables_and_outlives_its_source() {
    let root = scratch();
    let src = root.path().join("db");
    build_store(&src, 1200);
    // Default triggers: the checkpoint's flush starts no compaction, so every table stays.
    let db = Db::open(&src, Options::default()).unwrap();
    db.write(operation(1200)).unwrap(); // in the memtable only
    let ckpt = root.path().join("ckpt");
    db.checkpoint(&ckpt).unwrap();
    assert_eq!(
        contents(&Db::open_read_only(&ckpt, small()).unwrap()),
        contents(&db)
    );
    assert!(names_with_ext(&ckpt, "log").is_empty());
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        for name in names_with_ext(&ckpt, "sst") {
            let a = std::fs::metadata(ckpt.join(&name)).unwrap();
            let b = std::fs::metadata(src.join(&name)).unwrap();
            assert_eq!(a.ino(), b.ino(), "{name} is not a hard link");
        }
    }
    // Only into a new directory: not an existing one, even empty, nor a file.
    assert!(matches!(
        db.checkpoint(&ckpt),
        Err(Error::InvalidArgument(_))
    ));
    let file = root.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    assert!(matches!(
        db.checkpoint(&file),
        Err(Error::InvalidArgument(_))
    ));
    let empty = root.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert!(matches!(
        db.checkpoint(&empty),
        Err(Error::InvalidArgument(_))
    ));
    assert!(file_names(&empty).is_empty());
    let nested = root.path().join("new").join("nested");
    db.checkpoint(&nested).unwrap();
    let expected = contents(&db);
    db.close().unwrap();
    Db::destroy(&src).unwrap();
    for dir in [&ckpt, &nested] {
        let copy = Db::open(dir, small()).unwrap();
        assert_eq!(contents(&copy), expected);
    }
}

/// Checkpoint targets that would mix the copy with a store are refused with `InvalidArgument`
/// before anything is created: an empty path (it would resolve to the working directory, which
/// may be another store's), and any path inside the store's own directory (a name the next open
/// would take for one of its files, or a subdirectory). The store then opens as before.
#[test]
fn a_checkpoint_refuses_empty_paths_and_paths_inside_the_store() {
    let root = scratch();
    let src = root.path().join("db");
    build_store(&src, 600);
    let db = Db::open(&src, small()).unwrap();
    let before = file_names(&src);
    for target in [
        PathBuf::new(),
        src.join("999999.log"),
        src.join("000001.sst"),
        src.join("copy"),
        src.join("a").join("b"),
        src.join(".."),
        src.clone(),
    ] {
        let result = db.checkpoint(&target);
        assert!(
            matches!(result, Err(Error::InvalidArgument(_))),
            "{}: {result:?}",
            target.display()
        );
        assert_eq!(file_names(&src), before, "{}", target.display());
    }
    // Through a symbolic link, the store's directory is still the store's.
    #[cfg(unix)]
    {
        let link = root.path().join("link");
        std::os::unix::fs::symlink(&src, &link).unwrap();
        assert!(matches!(
            db.checkpoint(link.join("copy")),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(file_names(&src), before);
    }
    let expected = contents(&db);
    db.close().unwrap();
    let db = Db::open(&src, small()).unwrap();
    assert_eq!(contents(&db), expected);
}

/// Across file systems tables cannot be linked: they are copied (and the copy opens). Runs when
/// `/dev/shm` is another file system than the temporary directory.
#[test]
fn a_checkpoint_across_file_systems_copies_tables() {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let shm = Path::new("/dev/shm");
        let src = tempfile::tempdir().unwrap();
        let Ok(other) = tempfile::tempdir_in(shm) else {
            eprintln!("skipped: no /dev/shm");
            return;
        };
        let dev = |p: &Path| std::fs::metadata(p).unwrap().dev();
        if dev(src.path()) == dev(other.path()) {
            eprintln!("skipped: /dev/shm is on the temporary directory's file system");
            return;
        }
        build_store(src.path(), 800);
        let db = Db::open(src.path(), small()).unwrap();
        let ckpt = other.path().join("ckpt");
        db.checkpoint(&ckpt).unwrap();
        let tables = names_with_ext(&ckpt, "sst");
        assert!(!tables.is_empty());
        for name in &tables {
            assert_eq!(std::fs::metadata(ckpt.join(name)).unwrap().nlink(), 1);
        }
        assert_eq!(contents(&Db::open(&ckpt, small()).unwrap()), contents(&db));
    }
}

/// A read-only store's checkpoint holds what the reader sees, its WALs' writes included (written
/// as a table of the copy), and the store itself is untouched.
#[test]
fn a_read_only_store_can_be_checkpointed() {
    let root = scratch();
    let src = root.path().join("db");
    build_store(&src, 900);
    let before = dir_bytes(&src);
    let reader = Db::open_read_only(&src, small()).unwrap();
    let ckpt = root.path().join("ckpt");
    reader.checkpoint(&ckpt).unwrap();
    drop(reader);
    assert_eq!(dir_bytes(&src), before);
    let copy = Db::open(&ckpt, small()).unwrap();
    assert_eq!(contents(&copy), model_after(900));
}

// ---------------------------------------------------------------------------------------------
// destroy

/// `destroy` refuses an open store (writer or reader), removes a closed one and its directory,
/// and a new store can then be created there.
#[test]
fn destroy_removes_a_closed_store_and_refuses_an_open_one() {
    let root = scratch();
    let dir = root.path().join("db");
    build_store(&dir, 600);
    let db = Db::open(&dir, small()).unwrap();
    assert!(matches!(Db::destroy(&dir), Err(Error::Locked(_))));
    db.close().unwrap();
    let reader = Db::open_read_only(&dir, small()).unwrap();
    assert!(matches!(Db::destroy(&dir), Err(Error::Locked(_))));
    drop(reader);
    // The refusals removed nothing.
    assert_eq!(
        contents(&Db::open(&dir, small()).unwrap()),
        model_after(600)
    );
    Db::destroy(&dir).unwrap();
    assert!(!dir.exists());
    assert!(matches!(Db::destroy(&dir), Err(Error::InvalidArgument(_))));
    let db = Db::open(&dir, small()).unwrap();
    assert!(contents(&db).is_empty());
}

/// `destroy` leaves files it did not write and the directory holding them; refuses paths that hold
/// no store, removing nothing; and removes a store that lost its CURRENT.
#[test]
fn destroy_keeps_unknown_files_and_refuses_what_is_no_store() {
    let root = scratch();
    let dir = root.path().join("db");
    build_store(&dir, 600);
    std::fs::write(dir.join("notes.txt"), b"mine").unwrap();
    std::fs::create_dir(dir.join("backups")).unwrap();
    Db::destroy(&dir).unwrap();
    assert_eq!(file_names(&dir), vec!["backups", "notes.txt"]);

    // No store here now: refused, nothing removed.
    assert!(matches!(Db::destroy(&dir), Err(Error::InvalidArgument(_))));
    let stray = dir.join("000007.sst");
    std::fs::write(&stray, b"not a table of any store").unwrap();
    assert!(matches!(Db::destroy(&dir), Err(Error::InvalidArgument(_))));
    assert!(stray.exists());
    assert!(matches!(
        Db::destroy(dir.join("notes.txt")),
        Err(Error::InvalidArgument(_))
    ));
    let empty = root.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert!(matches!(
        Db::destroy(&empty),
        Err(Error::InvalidArgument(_))
    ));
    assert!(empty.exists());

    // A store that lost its CURRENT still has its MANIFEST: removed.
    let lost = root.path().join("lost");
    build_store(&lost, 300);
    std::fs::remove_file(lost.join("CURRENT")).unwrap();
    Db::destroy(&lost).unwrap();
    assert!(!lost.exists());
}
