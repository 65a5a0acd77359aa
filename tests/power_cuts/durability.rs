//! What a write's acknowledgement promises when the machine, not only the process, fails, and when
//! open itself is interrupted. Built on the fault-injection layer (`siftdb::fault_injection`), which
//! knows what was fsynced: a "process crash" keeps every byte written, a "power cut" keeps only
//! what was fsynced (and, by mode, a prefix or zeros of the rest).
//!
//! Each scenario is pinned down deterministically: flushes are held at a gate inside the filter
//! policy, so WALs pile up exactly as they do when a flush is slow.

use crate::common;
use common::gate::{gated_options, Gate};
use common::{copy_dir, names_with_ext};
use std::path::Path;
use std::sync::Arc;

use siftdb::fault_injection::{
    FaultInjector, OpKind, OpSite, PowerCut, UnsyncedData, UnsyncedNames,
};
use siftdb::{Db, Options, WriteBatch, WriteOptions};

fn key(i: usize) -> Vec<u8> {
    format!("key{i:04}").into_bytes()
}

fn value(i: usize, tag: &str) -> Vec<u8> {
    let mut v = format!("{tag}-{i}-").into_bytes();
    v.resize(300, b'v');
    v
}

const SYNC: WriteOptions = WriteOptions { sync: true };

/// Builds the directory a crash leaves when a flush is slow: several WALs, the MANIFEST written
/// before any of them was flushed. Writes `unsynced` unsynced puts (at least 13, so the memtable
/// fills and its flush starts and waits at the gate), freezes the next memtable with a `flush`
/// from another thread (which waits too), then writes `synced` synced puts; then the machine
/// stops (`kill`), the flushes are let go (they fail: the machine is down) and the store is
/// dropped.
fn slow_flush_then_crash(
    dir: &Path,
    faults: &FaultInjector,
    unsynced: usize,
    synced: usize,
) -> Arc<Gate> {
    let gate = Arc::new(Gate::default());
    gate.close();
    let db = Arc::new(Db::open(dir, gated_options(&gate, faults)).unwrap());
    for i in 0..unsynced {
        db.put(key(i), value(i, "early")).unwrap();
    }
    // A flush from another thread: it freezes the memtable (a new WAL) and waits at the gate.
    let flusher = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || db.flush())
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while names_with_ext(dir, "log").len() < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "the scenario needs several WALs: {:?}",
            names_with_ext(dir, "log")
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    for i in unsynced..unsynced + synced {
        let mut b = WriteBatch::new();
        b.put(key(i), value(i, "synced"));
        db.write_opt(b, &SYNC).unwrap();
    }
    faults.kill();
    gate.open();
    assert!(flusher.join().unwrap().is_err(), "the flush met the crash");
    drop(db);
    gate
}

/// Every write `0..n` is there with its value.
fn check_all(db: &Db, n: usize, unsynced: usize, what: &str) {
    check_range(db, 0..n, unsynced, what);
}

/// Every write of `range` is there with its value (the first `unsynced` writes were unsynced).
fn check_range(db: &Db, range: std::ops::Range<usize>, unsynced: usize, what: &str) {
    for i in range {
        let tag = if i < unsynced { "early" } else { "synced" };
        assert_eq!(
            db.get(key(i)).unwrap(),
            Some(value(i, tag)),
            "{what}: write {i}"
        );
    }
}

/// A crash while a flush is slow leaves WALs numbered at and above the MANIFEST's next-file
/// counter. An open interrupted at any of its operations (a process crash: what was written stays)
/// must lose none of them, and a WAL replayed once must never be replayed again over newer writes.
#[test]
fn interrupted_opens_lose_no_wal_and_replay_none_twice() {
    let (unsynced, synced) = (16, 5);
    let pristine = tempfile::tempdir().unwrap();
    let faults = FaultInjector::new(pristine.path()).unwrap();
    let gate = slow_flush_then_crash(pristine.path(), &faults, unsynced, synced);
    faults.revive();
    let n = unsynced + synced;
    let mut k = 0;
    loop {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().join("db");
        copy_dir(pristine.path(), &dir);
        let faults = FaultInjector::new(&dir).unwrap();
        faults.cut_after(k, Box::new(|_| true));
        let opened = Db::open(&dir, gated_options(&gate, &faults));
        let cut = faults.is_dead();
        drop(opened);
        faults.revive();
        // Default-sized memtables: the replay makes fewer tables, so the new WAL's number falls
        // below the old WALs' unless open numbers past every file.
        let options = || {
            Options::default()
                .filter(gated_options(&gate, &faults).filter_config().clone())
                .fault_injector(faults.clone())
        };
        let what = format!("open cut after {k} operations");
        let db = Db::open(&dir, options()).unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
        check_all(&db, n, unsynced, &what);
        db.put(key(0), b"NEW").unwrap();
        db.delete(key(1)).unwrap();
        drop(db);
        for round in 0..2 {
            let db = Db::open(&dir, options()).unwrap();
            assert_eq!(
                db.get(key(0)).unwrap().as_deref(),
                Some(&b"NEW"[..]),
                "{what}: an old WAL was replayed over a newer write (round {round})"
            );
            assert_eq!(
                db.get(key(1)).unwrap(),
                None,
                "{what}: a deleted key came back (round {round})"
            );
            check_range(&db, 2..n, unsynced, &what);
            db.flush().unwrap();
        }
        if !cut {
            break; // the open ran to the end without meeting the cut: every point was tried
        }
        k += 1;
    }
    assert!(k > 10, "only {k} cut points inside open");
}

/// A synced write makes every write before it durable, also those in older WALs whose memtables
/// are not yet tables: after a power cut that keeps only fsynced bytes, everything is there.
#[test]
fn a_synced_write_makes_every_earlier_write_durable() {
    let (unsynced, synced) = (40, 1);
    let dir = tempfile::tempdir().unwrap();
    let faults = FaultInjector::new(dir.path()).unwrap();
    let gate = slow_flush_then_crash(dir.path(), &faults, unsynced, synced);
    let report = faults.power_cut(PowerCut::strict()).unwrap();
    let db = Db::open(dir.path(), gated_options(&gate, &faults)).unwrap();
    let missing: Vec<usize> = (0..unsynced)
        .filter(|&i| db.get(key(i)).unwrap().is_none())
        .collect();
    assert!(
        missing.is_empty(),
        "the synced write is durable but {} of the {unsynced} writes before it are not: \
         {missing:?} ({report:?})",
        missing.len()
    );
    check_all(&db, unsynced + synced, unsynced, "after a power cut");
}

/// Without any synced write, a power cut may keep any part of each WAL's unsynced tail. The store
/// must open, with a prefix of the writes: a torn older WAL ends the history, whatever newer WALs
/// hold.
#[test]
fn unsynced_wals_cut_anywhere_open_with_a_prefix() {
    let n = 40;
    for seed in 0..40u64 {
        let dir = tempfile::tempdir().unwrap();
        let faults = FaultInjector::new(dir.path()).unwrap();
        let gate = slow_flush_then_crash(dir.path(), &faults, n, 0);
        let data = match seed % 3 {
            0 => UnsyncedData::KeepPrefix,
            1 => UnsyncedData::ZeroFill,
            _ => UnsyncedData::Random,
        };
        faults
            .power_cut(PowerCut {
                data,
                names: UnsyncedNames::Random,
                seed,
            })
            .unwrap();
        let db = Db::open(dir.path(), gated_options(&gate, &faults))
            .unwrap_or_else(|e| panic!("seed {seed}: a power cut made the store unopenable: {e}"));
        let present: Vec<bool> = (0..n).map(|i| db.get(key(i)).unwrap().is_some()).collect();
        let m = present.iter().take_while(|&&p| p).count();
        assert!(
            present[m..].iter().all(|&p| !p),
            "seed {seed}: not a prefix: {present:?}"
        );
        check_all(&db, m, n, &format!("seed {seed}"));
    }
}

/// A failed fsync, rename or directory sync, or a failed write, is returned to the caller, names
/// the file, stops further writes, and loses nothing acknowledged: after a reopen everything
/// acknowledged is there.
#[test]
fn injected_io_errors_are_reported_with_their_file_and_lose_nothing() {
    let kinds = [
        (OpKind::Write, ".log"),
        (OpKind::Sync, ".log"),
        (OpKind::Write, ".sst"),
        (OpKind::Sync, ".sst"),
        (OpKind::SyncDir, ""),
        (OpKind::Sync, "MANIFEST"),
        (OpKind::Create, ".log"),
        (OpKind::Remove, ".log"),
    ];
    for (kind, suffix) in kinds {
        let dir = tempfile::tempdir().unwrap();
        let faults = FaultInjector::new(dir.path()).unwrap();
        let options = || {
            Options::default()
                .write_buffer_size(4096)
                .fault_injector(faults.clone())
        };
        let db = Db::open(dir.path(), options()).unwrap();
        let matches = move |s: &OpSite| s.kind == kind && s.file.contains(suffix);
        faults.fail_after(2, Box::new(matches));
        let mut acked = 0;
        let mut error = None;
        for i in 0..400 {
            let mut b = WriteBatch::new();
            b.put(key(i), value(i, "early"));
            let r = db.write_opt(b, &WriteOptions { sync: i % 3 == 0 });
            match r {
                Ok(()) => acked = i + 1,
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
        }
        // Failures in background work reach the writer later, or at flush.
        let error = error.or_else(|| db.flush().err());
        let injected = faults.injected();
        assert_eq!(injected.len(), 1, "{kind:?} on {suffix}: not injected");
        let site = &injected[0];
        match (kind, error) {
            // A WAL that cannot be removed after its flush is garbage for the next open.
            (OpKind::Remove, None) => {}
            (_, None) => panic!("{kind:?} on {suffix}: the injected failure was never reported"),
            (_, Some(error)) => {
                let text = error.to_string();
                assert!(
                    text.contains(&site.file),
                    "{kind:?}: the error does not name {}: {text}",
                    site.file
                );
                // After a failed write or sync the file's state is unknown: no more writes.
                // A failed create or directory sync changed nothing and may be retried.
                if matches!(kind, OpKind::Write | OpKind::Sync) {
                    assert!(
                        db.put(b"after", b"failure").is_err(),
                        "{kind:?} on {suffix}: writes must stop after it ({text})"
                    );
                }
            }
        }
        drop(db);
        let db = Db::open(dir.path(), options()).unwrap();
        check_all(&db, acked, usize::MAX, &format!("{kind:?} on {suffix}"));
    }
}
