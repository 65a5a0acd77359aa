//! `Db` as a shared handle: clones are the same store; `close` on any handle closes it for all
//! (every later call returns `Error::Closed`, typed, never a panic), reports the background error,
//! and releases `LOCK` unless a scan or cursor made before still reads; dropping the last clone
//! closes it too. Writes racing a close are acknowledged (and then recovered) or refused with
//! `Closed` (and then absent): none is lost silently.

use crate::common;
use common::gate::{gated_options, Gate};
use common::scratch;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};

use siftdb::fault_injection::{FaultInjector, OpKind, OpSite};
use siftdb::{Cursor, Db, Error, Options, Scan, Ticker, WriteBatch, WriteOptions};

fn is_closed<T: std::fmt::Debug>(r: siftdb::Result<T>, dir: &Path) -> bool {
    match r {
        Err(Error::Closed(p)) => p == dir,
        other => panic!(
            "expected Error::Closed naming {}, got {other:?}",
            dir.display()
        ),
    }
}

#[test]
fn a_db_is_a_send_sync_handle_and_clones_are_the_same_store() {
    fn shared<T: Send + Sync + Clone + 'static>() {}
    shared::<Db>();
    fn sendable<T: Send + 'static>() {}
    sendable::<Scan>();
    sendable::<Cursor>();

    let dir = scratch();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let other = db.clone();
    db.put("k", "from db").unwrap();
    assert_eq!(other.get("k").unwrap(), Some(b"from db".to_vec()));
    other.put("k", "from the clone").unwrap();
    assert_eq!(db.get("k").unwrap(), Some(b"from the clone".to_vec()));
    let snapshot = other.snapshot();
    db.delete("k").unwrap();
    assert_eq!(
        db.get_at(&snapshot, "k").unwrap(),
        Some(b"from the clone".to_vec())
    );
    assert_eq!(db.path(), other.path());
}

/// `close` on one handle: the other handle's every call returns `Closed` naming the store; the
/// write made before is on disk; `LOCK` is free although the other handle lives.
#[test]
fn close_from_one_handle_closes_every_handle() {
    let dir = scratch();
    let path = dir.path();
    let db = Db::open(path, Options::default()).unwrap();
    let other = db.clone();
    db.put("k", "v").unwrap();
    let snapshot = other.snapshot();
    db.close().unwrap();

    assert!(is_closed(other.get("k"), path));
    assert!(is_closed(other.get_pinned("k"), path));
    assert!(is_closed(other.get_at(&snapshot, "k"), path));
    assert!(is_closed(other.put("k", "w"), path));
    assert!(is_closed(other.delete("k"), path));
    let mut batch = WriteBatch::new();
    batch.put("a", "1");
    assert!(is_closed(
        other.write_opt(batch, &WriteOptions::new().sync(true)),
        path
    ));
    assert!(is_closed(other.sync_wal(), path));
    assert!(is_closed(other.flush(), path));
    assert!(is_closed(other.compact(), path));
    let copy = path.with_extension("copy");
    assert!(is_closed(other.checkpoint(&copy), path));
    assert!(!copy.exists(), "a refused checkpoint leaves nothing behind");
    assert!(is_closed(other.explain_get("k"), path));
    let answers = other.multi_get(&["k", "x"]);
    assert_eq!(answers.len(), 2);
    for a in answers {
        assert!(is_closed(a, path));
    }
    // Iterators made after the close: one `Closed` item, then the end.
    for mut scan in [
        other.iter(),
        other.scan("a".."z"),
        other.scan_prefix("k"),
        other.iter_at(&snapshot),
    ] {
        assert!(is_closed(scan.next().unwrap(), path));
        assert!(scan.next().is_none() && scan.next_back().is_none());
    }
    assert!(is_closed(other.iter().next_back().unwrap(), path));
    let mut cursor = other.cursor();
    assert!(is_closed(cursor.seek_to_first(), path));
    assert!(!cursor.valid());
    assert!(is_closed(cursor.status(), path));
    assert!(is_closed(other.cursor_at(&snapshot).seek("k"), path));
    assert!(is_closed(other.contains_key("k"), path));
    assert!(is_closed(other.first_key_value(), path));
    assert!(is_closed(other.last_key_value_at(&snapshot), path));
    assert!(is_closed(other.disk_space(), path));
    assert_eq!(other.approximate_len(), 0);
    // What needs no store still answers.
    assert_eq!(other.path(), path);
    assert!(!other.is_read_only());
    let _ = other.statistics();
    // A second close, from either handle: Ok.
    other.close().unwrap();
    db.close().unwrap();

    // `LOCK` is free while both closed handles live, and the write is there.
    let reopened = Db::open(path, Options::default()).unwrap();
    assert_eq!(reopened.get("k").unwrap(), Some(b"v".to_vec()));
    drop((db, other, snapshot));
    assert_eq!(reopened.get("k").unwrap(), Some(b"v".to_vec()));
}

/// The store stays open while any clone lives, and dropping the last one closes it.
#[test]
fn dropping_every_clone_closes_the_store() {
    let dir = scratch();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let clones: Vec<Db> = (0..3).map(|_| db.clone()).collect();
    drop(db);
    let threads: Vec<_> = clones
        .into_iter()
        .enumerate()
        .map(|(t, db)| {
            std::thread::spawn(move || {
                for i in 0..200 {
                    db.put(format!("t{t}-{i:03}"), "v").unwrap();
                }
                db // handed back, still open
            })
        })
        .collect();
    let mut clones: Vec<Db> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let last = clones.pop().unwrap();
    drop(clones);
    // One clone left: the store is open, and its directory locked.
    assert!(matches!(
        Db::open(dir.path(), Options::default()),
        Err(Error::Locked(_))
    ));
    assert_eq!(last.iter().count(), 600);
    drop(last);
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.iter().count(), 600);
}

/// A table fsync fails in the background: writers on every handle get the background error, the
/// handle that closes gets it from `close`, and a second `close` is `Ok`.
#[test]
fn close_reports_the_background_error_whichever_handle_closes() {
    let dir = scratch();
    let faults = FaultInjector::new(dir.path()).unwrap();
    let db = Db::open(
        dir.path(),
        Options::default()
            .write_buffer_size(4096)
            .fault_injector(faults.clone()),
    )
    .unwrap();
    let other = db.clone();
    faults.fail_after(
        0,
        Box::new(|s: &OpSite| s.kind == OpKind::Sync && s.file.ends_with(".sst")),
    );
    for i in 0..20 {
        db.put(format!("k{i:02}"), [7u8; 100]).unwrap();
    }
    assert!(matches!(other.flush(), Err(Error::Background(_))));
    assert!(matches!(db.put("after", "x"), Err(Error::Background(_))));
    let Err(Error::Background(reported)) = other.close() else {
        panic!("close must report the background error")
    };
    assert_eq!(faults.injected().len(), 1);
    assert!(
        matches!(reported.cause(), Some(Error::Io(_))),
        "the injected I/O error: {reported}"
    );
    db.close().unwrap();
    assert!(matches!(db.put("k", "v"), Err(Error::Closed(_))));
    drop((db, other));
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.iter().count(), 20, "every acknowledged write survives");
}

/// Scans and cursors made before the close keep reading what they hold, both ways, and keep
/// `LOCK` until dropped.
#[test]
fn scans_and_cursors_made_before_close_keep_reading_and_hold_the_lock_which_the_error_names() {
    let dir = scratch();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    for i in 0..100 {
        db.put(format!("k{i:03}"), format!("v{i}")).unwrap();
    }
    db.flush().unwrap();
    db.put("k100", "in the memtable").unwrap();
    let mut scan = db.scan("k050"..);
    let mut cursor = db.cursor();
    let open_here = Db::open(dir.path(), Options::default()).err().unwrap();
    assert!(
        open_here
            .to_string()
            .contains("held by a Db open in this process"),
        "{open_here}"
    );
    db.close().unwrap();
    // The error names what holds the lock: the scan and the cursor of the closed store.
    match Db::open(dir.path(), Options::default()) {
        Err(Error::Locked(locked)) => {
            assert_eq!(locked, dir.path());
            assert!(
                locked
                    .to_string()
                    .contains("held by 2 scans or cursors of a closed Db in this process"),
                "{locked}"
            );
        }
        other => panic!("expected Locked, got {:?}", other.err()),
    }
    assert_eq!(scan.next_back().unwrap().unwrap().0, b"k100");
    assert_eq!(scan.next().unwrap().unwrap().0, b"k050");
    cursor.seek_for_prev("k0995").unwrap();
    assert_eq!((cursor.key(), cursor.value()), (&b"k099"[..], &b"v99"[..]));
    cursor.next().unwrap();
    assert_eq!(cursor.key(), b"k100");
    drop(cursor);
    let e = Db::open(dir.path(), Options::default()).err().unwrap();
    assert!(
        matches!(&e, Error::Locked(_)) && e.to_string().contains("1 scan or cursor"),
        "{e}"
    );
    assert_eq!(scan.count(), 49, "k051..=k099, the rest of the range");
    // The scan is gone: `LOCK` is free although the closed handle lives.
    let reopened = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(reopened.iter().count(), 101);
    drop(db);
}

/// A read-only store closes the same way, and its shared `LOCK` goes with the close.
#[test]
fn a_read_only_store_closes_for_every_handle() {
    let dir = scratch();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put("k", "v").unwrap();
    db.close().unwrap();
    let reader = Db::open_read_only(dir.path(), Options::default()).unwrap();
    let other = reader.clone();
    assert_eq!(other.get("k").unwrap(), Some(b"v".to_vec()));
    assert!(matches!(other.put("k", "w"), Err(Error::ReadOnly(_))));
    reader.close().unwrap();
    assert!(is_closed(other.get("k"), dir.path()));
    assert!(is_closed(other.put("k", "w"), dir.path()));
    assert!(is_closed(other.iter().next().unwrap(), dir.path()));
    // A writer may open now, while both closed handles live.
    let writer = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(writer.get("k").unwrap(), Some(b"v".to_vec()));
    drop((reader, other));
}

/// Two handles close at once: both return `Ok` (the first reports, the second waits for it), and
/// the directory is free afterwards.
#[test]
fn closes_from_two_threads_at_once_are_both_ok() {
    for _ in 0..20 {
        let dir = scratch();
        let db = Db::open(dir.path(), Options::default()).unwrap();
        for i in 0..50 {
            db.put(format!("k{i}"), "v").unwrap();
        }
        let barrier = Arc::new(Barrier::new(2));
        let closers: Vec<_> = (0..2)
            .map(|_| {
                let (db, barrier) = (db.clone(), Arc::clone(&barrier));
                std::thread::spawn(move || {
                    barrier.wait();
                    db.close()
                })
            })
            .collect();
        for c in closers {
            c.join().unwrap().unwrap();
        }
        let db = Db::open(dir.path(), Options::default()).unwrap();
        assert_eq!(db.iter().count(), 50);
    }
}

/// Writers on several handles race a close: each write is either acknowledged, and then found
/// after reopening, or refused with `Closed`, and then absent. Memtables are tiny and their
/// flushes held at a gate, so some writers are stalled waiting for room when the close comes:
/// they too return `Closed` rather than hang.
#[test]
fn writes_racing_a_close_are_acknowledged_and_kept_or_refused_and_absent() {
    for round in 0..4 {
        let dir = scratch();
        let faults = FaultInjector::new(dir.path()).unwrap();
        let gate = Arc::new(Gate::default());
        if round % 2 == 1 {
            gate.close(); // the flushes wait: writers stall once 8 memtables wait
        }
        let db = Db::open(dir.path(), gated_options(&gate, &faults)).unwrap();
        let writers = 4;
        let acknowledged: Arc<Vec<AtomicU64>> =
            Arc::new((0..writers).map(|_| AtomicU64::new(0)).collect());
        let refused = Arc::new(AtomicBool::new(false));
        let threads: Vec<_> = (0..writers)
            .map(|t| {
                let (db, acknowledged, refused) =
                    (db.clone(), Arc::clone(&acknowledged), Arc::clone(&refused));
                std::thread::spawn(move || {
                    for i in 0.. {
                        let sync = WriteOptions::new().sync(i % 7 == 0);
                        let mut batch = WriteBatch::new();
                        batch.put(format!("t{t}-{i:06}"), [b'v'; 200]);
                        match db.write_opt(batch, &sync) {
                            Ok(()) => acknowledged[t].store(i + 1, Ordering::SeqCst),
                            Err(Error::Closed(_)) => {
                                refused.store(true, Ordering::SeqCst);
                                return i;
                            }
                            Err(e) => panic!("writer {t}, write {i}: {e}"),
                        }
                    }
                    unreachable!()
                })
            })
            .collect();
        // Close once every writer has written a little, or, with the gate shut, once a writer
        // has stalled waiting for memtables the held flushes do not free.
        if round % 2 == 1 {
            while db.statistics().ticker(Ticker::WriteStallMemtablesMicros) == 0 {
                std::thread::yield_now();
            }
        } else {
            while acknowledged.iter().any(|a| a.load(Ordering::SeqCst) < 20) {
                std::thread::yield_now();
            }
        }
        let closer = {
            let db = db.clone();
            std::thread::spawn(move || db.close())
        };
        let tried: Vec<u64> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        gate.open();
        closer.join().unwrap().unwrap();
        assert!(refused.load(Ordering::SeqCst));
        drop(db);

        let db = Db::open(dir.path(), Options::default()).unwrap();
        for (t, &refused_at) in tried.iter().enumerate() {
            let acked = acknowledged[t].load(Ordering::SeqCst);
            assert_eq!(
                acked, refused_at,
                "round {round}: writer {t} wrote in order"
            );
            let found: Vec<Vec<u8>> = db
                .scan_prefix(format!("t{t}-"))
                .map(|kv| kv.unwrap().0)
                .collect();
            let expected: Vec<Vec<u8>> = (0..acked)
                .map(|i| format!("t{t}-{i:06}").into_bytes())
                .collect();
            assert_eq!(
                found.len(),
                expected.len(),
                "round {round}: writer {t}: {acked} acknowledged"
            );
            assert_eq!(found, expected, "round {round}: writer {t}");
        }
    }
}

/// A `flush` waiting for the flush thread when another handle closes the store returns `Closed`
/// instead of waiting for a flush that will not come.
#[test]
fn a_flush_waiting_when_the_store_closes_returns_closed() {
    let dir = scratch();
    let faults = FaultInjector::new(dir.path()).unwrap();
    let gate = Arc::new(Gate::default());
    gate.close();
    let db = Db::open(dir.path(), gated_options(&gate, &faults)).unwrap();
    for i in 0..60 {
        db.put(format!("k{i:03}"), [b'v'; 100]).unwrap();
    }
    gate.wait_arrival(); // a flush is held at the gate
    let flusher = {
        let db = db.clone();
        std::thread::spawn(move || db.flush())
    };
    let closer = {
        let db = db.clone();
        std::thread::spawn(move || db.close())
    };
    // The flusher returns while the gate is still shut: it does not wait for the held flush.
    assert!(is_closed(flusher.join().unwrap(), dir.path()));
    gate.open();
    closer.join().unwrap().unwrap();
    drop(db);
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.iter().count(), 60);
}
