//! `BackupEngine`: incremental sharing, backups taken while writers run without sync, keyspaces,
//! damage found by `verify` and `restore`, and the engine's refusals and clean-up.
//!
//! Power cuts and SIGKILLs during backups, purges and restores: `tests/power_cuts/backup_crash.rs`,
//! `tests/sigkill/backup_sigkill.rs`.

use crate::common;
use common::backups::{restore_and_open, shared_files, store_contents, Contents};
use common::keyspaces::assert_invalid_argument_naming;
use common::noise;
use common::scratch;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use siftdb::{BackupEngine, Db, Error, Filter, Keyspace, Options};

/// A store that compacts only when told to: the tables a backup sees stay until the next one.
fn still() -> Options {
    Options::default()
        .compact_l0_when_idle(false)
        .compact_l0_for_reads(false)
}

fn ukey(i: u64) -> Vec<u8> {
    format!("user{i:08}").into_bytes()
}

/// The store files (tables, WALs, MANIFESTs) among the backup directory's `names`, by kind.
fn by_kind(names: &[String]) -> BTreeMap<&'static str, Vec<String>> {
    let mut out: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
    for n in names {
        let kind = if n.ends_with(".sst") {
            "table"
        } else if n.ends_with(".log") {
            "wal"
        } else if n.starts_with("MANIFEST-") {
            "manifest"
        } else {
            panic!("unexpected file {n} in the backup directory")
        };
        out.entry(kind).or_default().push(n.clone());
    }
    out
}

/// The size a shared file's name records (`<stem>_<crc>_<size>[.ext]`).
fn recorded_size(name: &str) -> u64 {
    let stem = name.split('.').next().unwrap();
    stem.rsplit('_').next().unwrap().parse().unwrap()
}

/// The store file number a shared table's name starts with.
fn table_number(name: &str) -> u64 {
    name.split('_').next().unwrap().parse().unwrap()
}

#[test]
fn a_second_backup_after_ten_percent_new_writes_copies_only_the_new_tables_and_the_wal() {
    let dir = scratch();
    let (live, backups) = (dir.path().join("live"), dir.path().join("backups"));
    let db = Db::open(&live, still()).unwrap();
    let mut engine = BackupEngine::open(&backups).unwrap();
    for i in 0..20_000 {
        db.put(ukey(i), noise(i, 200)).unwrap();
    }
    db.compact().unwrap();
    let first = engine.create_backup(&db).unwrap();
    let after_first = shared_files(&backups);
    let tables_first: BTreeSet<u64> = by_kind(&after_first)["table"]
        .iter()
        .map(|n| table_number(n))
        .collect();
    let first_table_bytes: u64 = by_kind(&after_first)["table"]
        .iter()
        .map(|n| recorded_size(n))
        .sum();
    assert!(tables_first.len() >= 2, "{after_first:?}");

    // 10 % new keys, flushed into a table of their own, and a few more left in the WAL.
    for i in 20_000..22_000 {
        db.put(ukey(i), noise(i, 200)).unwrap();
    }
    db.flush().unwrap();
    for i in 22_000..22_050 {
        db.put(ukey(i), noise(i, 200)).unwrap();
    }
    let live_tables: BTreeSet<u64> = common::names_with_ext(&live, "sst")
        .iter()
        .map(|n| n.trim_end_matches(".sst").parse().unwrap())
        .collect();
    let new_in_store: BTreeSet<u64> = live_tables.difference(&tables_first).copied().collect();
    assert!(
        tables_first.is_subset(&live_tables),
        "a table of the first backup was compacted away: the test needs them to stay"
    );

    let second = engine.create_backup(&db).unwrap();
    let after_second = shared_files(&backups);
    let added: Vec<String> = after_second
        .iter()
        .filter(|n| !after_first.contains(n))
        .cloned()
        .collect();
    let added = by_kind(&added);
    let added_tables: BTreeSet<u64> = added["table"].iter().map(|n| table_number(n)).collect();
    assert_eq!(
        added_tables, new_in_store,
        "the second backup copied other tables than the new ones"
    );
    assert_eq!(added["manifest"].len(), 1, "{added:?}");
    assert_eq!(added["wal"].len(), 1, "the live WAL's prefix: {added:?}");
    assert!(recorded_size(&added["wal"][0]) > 50 * 200, "{added:?}");
    let added_table_bytes: u64 = added["table"].iter().map(|n| recorded_size(n)).sum();
    assert!(
        added_table_bytes * 100 <= first_table_bytes * 15,
        "copied {added_table_bytes} table bytes after 10 % new writes, the first backup's tables \
         hold {first_table_bytes}"
    );

    let info = engine.list();
    assert_eq!(
        info.iter().map(|b| b.id).collect::<Vec<_>>(),
        [first, second]
    );
    assert!(info[1].size > info[0].size && info[1].files > info[0].files);
    let want = store_contents(&db);
    let restored = restore_and_open(&engine, second, &dir.path().join("r2"), still(), "second");
    assert_eq!(store_contents(&restored), want);
    assert_eq!(restored.iter().count(), 22_050);
    // The first one is the store as it was.
    let restored = restore_and_open(&engine, first, &dir.path().join("r1"), still(), "first");
    assert_eq!(restored.iter().count(), 20_000);
    assert_eq!(restored.get(ukey(20_000)).unwrap(), None);
}

#[test]
fn a_backup_taken_while_writers_run_without_sync_holds_every_write_acknowledged_before_it() {
    const WRITERS: usize = 2;
    let dir = scratch();
    let (live, backups) = (dir.path().join("live"), dir.path().join("backups"));
    // Small memtables and tables: flushes, WAL switches and compactions go on during backups.
    let options = Options::default()
        .write_buffer_size(32 << 10)
        .target_file_size(16 << 10)
        .max_bytes_for_level_base(64 << 10)
        .level0_compaction_trigger(2)
        .level0_compaction_trigger_during_writes(4);
    let db = Db::open(&live, options.clone()).unwrap();
    let mut engine = BackupEngine::open(&backups).unwrap();
    let acked: Arc<[AtomicU64; WRITERS]> = Arc::new(Default::default());
    let stop = Arc::new(AtomicBool::new(false));
    let key = |w: usize, i: u64| format!("w{w}-{i:09}").into_bytes();
    let value = |w: usize, i: u64| noise(i * 7 + w as u64, 40 + (i % 90) as usize);
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (db, acked, stop) = (db.clone(), Arc::clone(&acked), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    db.put(key(w, i), value(w, i)).unwrap();
                    i += 1;
                    acked[w].store(i, Ordering::Release);
                }
            })
        })
        .collect();
    let mut taken = Vec::new();
    for _ in 0..6 {
        // Let the writers get ahead of the last backup before taking the next.
        let floor: u64 = acked.iter().map(|a| a.load(Ordering::Acquire)).sum::<u64>() + 1500;
        while acked.iter().map(|a| a.load(Ordering::Acquire)).sum::<u64>() < floor {
            std::thread::yield_now();
        }
        let before: Vec<u64> = acked.iter().map(|a| a.load(Ordering::Acquire)).collect();
        let id = engine.create_backup(&db).unwrap();
        taken.push((id, before));
        if taken.len() == 4 {
            engine.purge_old(3).unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    assert_eq!(
        engine.list().len(),
        5,
        "purge_old(3) of four, then two more"
    );
    for (id, before) in taken.into_iter().skip(1) {
        engine.verify(id).unwrap();
        let what = format!("backup {id}");
        let restored = restore_and_open(
            &engine,
            id,
            &dir.path().join(format!("r{id}")),
            options.clone(),
            &what,
        );
        for (w, &acked_before) in before.iter().enumerate() {
            let prefix = format!("w{w}-").into_bytes();
            let mut found = 0;
            for entry in restored.scan_prefix(&prefix) {
                let (k, v) = entry.unwrap();
                assert_eq!(k, key(w, found), "{what}: writer {w}'s writes have a hole");
                assert_eq!(v, value(w, found), "{what}: wrong value");
                found += 1;
            }
            assert!(
                found >= acked_before,
                "{what}: writer {w} had {acked_before} writes acknowledged before the backup \
                 began, the backup holds {found}"
            );
        }
    }
}

#[test]
fn keyspaces_survive_backup_and_restore_with_their_options_and_dropped_ones_stay_dropped() {
    let dir = scratch();
    let (live, backups) = (dir.path().join("live"), dir.path().join("backups"));
    let small = Options::default().write_buffer_size(16 << 10);
    let users_options = small.clone().filter(Filter::ribbon(10.0));
    let events_options = small.clone().filter(Filter::none());
    let db = Db::open(&live, small.clone()).unwrap();
    let users = db.keyspace_with("users", users_options.clone()).unwrap();
    let events = db.keyspace_with("events", events_options.clone()).unwrap();
    let doomed = db.keyspace_with("doomed", small.clone()).unwrap();
    let gone = db.keyspace_with("gone", small.clone()).unwrap();
    let mut engine = BackupEngine::open(&backups).unwrap();
    let write_round = |round: u64, small_ones: &[&Keyspace]| {
        for i in 0..600 {
            let k = format!("{round}-{i:05}");
            users.put(&k, noise(i, 60)).unwrap();
            events.put(&k, noise(i + 1, 30)).unwrap();
            if i % 3 == 0 {
                for ks in small_ones {
                    ks.put(&k, ks.name()).unwrap();
                }
            }
        }
        // Some of it in tables, the rest in memtables and WALs.
        users.flush().unwrap();
    };
    write_round(0, &[&doomed, &gone]);
    db.drop_keyspace("gone").unwrap();
    write_round(1, &[&doomed]);
    let first = engine.create_backup(&db).unwrap();
    let at_first = store_contents(&db);
    write_round(2, &[&doomed]);
    db.drop_keyspace("doomed").unwrap();
    let second = engine.create_backup(&db).unwrap();
    let at_second = store_contents(&db);
    assert_eq!(
        at_first.keys().collect::<Vec<_>>(),
        ["default", "doomed", "events", "users"]
    );
    assert_eq!(
        at_second.keys().collect::<Vec<_>>(),
        ["default", "events", "users"]
    );

    for (id, want, name) in [(first, &at_first, "r1"), (second, &at_second, "r2")] {
        let restored = restore_and_open(&engine, id, &dir.path().join(name), small.clone(), name);
        let check = |restored: &Db, what: &str| {
            assert_eq!(&store_contents(restored), want, "{what}");
            // Each keyspace opens with the options it was made with, and only with them.
            restored
                .keyspace_with("users", users_options.clone())
                .unwrap();
            restored
                .keyspace_with("events", events_options.clone())
                .unwrap();
            assert_invalid_argument_naming(
                restored.keyspace_with("users", events_options.clone()),
                "users",
                what,
            );
        };
        check(&restored, name);
        // And again once compacted and reopened: the replayed WALs went into the right tables.
        restored.compact().unwrap();
        drop(restored);
        let reopened = Db::open(dir.path().join(name), small.clone()).unwrap();
        check(&reopened, name);
    }
}

/// Flips one byte of `path` at `at`.
fn flip(path: &Path, at: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at] ^= 0x10;
    std::fs::write(path, bytes).unwrap();
}

/// Asserts that `r` is `Error::Corruption` naming `file`.
#[track_caller]
fn assert_corruption_naming(r: siftdb::Result<()>, file: &Path, what: &str) {
    match r {
        Err(Error::Corruption { file: f, .. }) if f == file => {}
        other => panic!("{what}: expected Error::Corruption naming {file:?}, got {other:?}"),
    }
}

#[test]
fn verify_and_restore_find_a_flipped_byte_in_every_file_of_a_backup() {
    let dir = scratch();
    let (live, backups) = (dir.path().join("live"), dir.path().join("backups"));
    let db = Db::open(&live, Options::default().write_buffer_size(16 << 10)).unwrap();
    let other = db.keyspace("other").unwrap();
    for i in 0..400 {
        db.put(ukey(i), noise(i, 100)).unwrap();
        other.put(ukey(i), noise(i + 9, 50)).unwrap();
    }
    db.flush().unwrap();
    db.put(b"in the WAL", b"only").unwrap();
    let mut engine = BackupEngine::open(&backups).unwrap();
    let id = engine.create_backup(&db).unwrap();
    engine.verify(id).unwrap();
    let files = shared_files(&backups);
    assert!(files.iter().filter(|n| n.ends_with(".sst")).count() >= 2);
    let mut target = 0;
    for name in files.iter().chain([&format!("BACKUP-{id:06}")]) {
        let path = backups.join(name);
        let len = std::fs::metadata(&path).unwrap().len() as usize;
        for at in [0, len / 3, len / 2, len - 1] {
            let what = format!("{name} flipped at {at}");
            flip(&path, at);
            if name.starts_with("BACKUP-") {
                // Read again by verify; a new engine lists it as damaged.
                assert_corruption_naming(engine.verify(id), &path, &what);
                drop(engine);
                let reopened = BackupEngine::open(&backups).unwrap();
                assert!(reopened.list().is_empty(), "{what}");
                assert_eq!(reopened.damaged(), [id], "{what}");
                assert_corruption_naming(reopened.verify(id), &path, &what);
                let t = dir.path().join(format!("t{target}"));
                target += 1;
                assert_corruption_naming(reopened.restore(id, &t), &path, &what);
                // Its files are unknown: none is removed.
                assert_eq!(shared_files(&backups), files, "{what}");
                engine = reopened;
            } else {
                assert_corruption_naming(engine.verify(id), &path, &what);
                let t = dir.path().join(format!("t{target}"));
                target += 1;
                assert_corruption_naming(engine.restore(id, &t), &path, &what);
                assert!(!t.exists(), "{what}: a failed restore left its directory");
            }
            flip(&path, at);
        }
    }
    drop(engine);
    let engine = BackupEngine::open(&backups).unwrap();
    engine.verify(id).unwrap();
    let restored = restore_and_open(&engine, id, &dir.path().join("r"), Options::default(), "r");
    assert_eq!(store_contents(&restored), store_contents(&db));
}

#[test]
fn the_engine_refuses_what_it_cannot_do_and_cleans_up_what_no_backup_names() {
    let dir = scratch();
    let (live, backups) = (dir.path().join("live"), dir.path().join("backups"));
    fn shareable<T: Send + Sync>(_: &T) {}
    let db = Db::open(&live, still()).unwrap();
    let mut engine = BackupEngine::open(&backups).unwrap();
    shareable(&engine);
    assert!(matches!(
        BackupEngine::open(&backups),
        Err(Error::Locked(_))
    ));
    let mut states: Vec<Contents> = Vec::new();
    let mut ids = Vec::new();
    for round in 0..4u64 {
        for i in 0..300 {
            db.put(ukey(round * 300 + i), noise(i, 80)).unwrap();
        }
        db.flush().unwrap();
        ids.push(engine.create_backup(&db).unwrap());
        states.push(store_contents(&db));
    }
    assert_eq!(ids, [1, 2, 3, 4]);

    // Refused targets, unknown backups.
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let busy = dir.path().join("busy");
    std::fs::create_dir(&busy).unwrap();
    std::fs::write(busy.join("keep-me"), b"x").unwrap();
    for target in [Path::new(""), &file, &busy, &live] {
        match engine.restore(1, target) {
            Err(Error::InvalidArgument(_)) => {}
            other => panic!("restore into {target:?}: {other:?}"),
        }
    }
    assert_eq!(std::fs::read(busy.join("keep-me")).unwrap(), b"x");
    for r in [engine.verify(9), engine.restore(9, dir.path().join("n"))] {
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    }
    assert!(matches!(engine.delete(9), Err(Error::InvalidArgument(_))));
    // An existing empty directory is a fine target.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    engine.restore(1, &empty).unwrap();

    // Deleting one in the middle keeps what the others share; purging keeps the newest.
    engine.delete(2).unwrap();
    let held = |engine: &BackupEngine| {
        let mut all: Vec<String> = Vec::new();
        for b in engine.list() {
            let meta = std::fs::read_to_string(backups.join(format!("BACKUP-{:06}", b.id)));
            for line in meta.unwrap().lines() {
                if let Some(rest) = line.strip_prefix("file ") {
                    let parts: Vec<&str> = rest.split(' ').collect();
                    let (stem, ext) = match parts[0].rsplit_once('.') {
                        Some((s, e)) => (s.to_string(), format!(".{e}")),
                        None => (parts[0].to_string(), String::new()),
                    };
                    all.push(format!("{stem}_{}_{}{ext}", parts[2], parts[1]));
                }
            }
        }
        all.sort();
        all.dedup();
        all
    };
    assert_eq!(shared_files(&backups), held(&engine));
    engine.purge_old(1).unwrap();
    assert_eq!(engine.list().iter().map(|b| b.id).collect::<Vec<_>>(), [4]);
    assert_eq!(shared_files(&backups), held(&engine));
    let restored = restore_and_open(&engine, 4, &dir.path().join("r4"), still(), "r4");
    assert_eq!(store_contents(&restored), states[3]);

    // What an interrupted backup leaves is removed at open; files it does not know stay.
    drop(engine);
    std::fs::write(backups.join("000777.sst.tmp"), b"half").unwrap();
    std::fs::write(backups.join("BACKUP-000005.tmp"), b"half").unwrap();
    std::fs::write(backups.join("000777_0badf00d_4.sst"), b"copy").unwrap();
    std::fs::write(backups.join("notes.txt"), b"mine").unwrap();
    let mut engine = BackupEngine::open(&backups).unwrap();
    assert_eq!(shared_files(&backups), {
        let mut v = held(&engine);
        v.push("notes.txt".into());
        v.sort();
        v
    });
    // The next id follows the newest.
    assert_eq!(engine.create_backup(&db).unwrap(), 5);
    engine.purge_old(0).unwrap();
    assert!(engine.list().is_empty());
    assert_eq!(shared_files(&backups), ["notes.txt"]);
}

#[test]
fn a_store_opened_read_only_is_backed_up_with_what_its_wals_hold() {
    let dir = scratch();
    let (live, backups) = (dir.path().join("live"), dir.path().join("backups"));
    let db = Db::open(&live, Options::default()).unwrap();
    for i in 0..100 {
        db.put(ukey(i), b"v").unwrap();
    }
    db.flush().unwrap();
    for i in 100..150 {
        db.put(ukey(i), b"w").unwrap();
    }
    let want = store_contents(&db);
    db.close().unwrap();
    let reader = Db::open_read_only(&live, Options::default()).unwrap();
    let mut engine = BackupEngine::open(&backups).unwrap();
    let id = engine.create_backup(&reader).unwrap();
    engine.verify(id).unwrap();
    let restored = restore_and_open(&engine, id, &dir.path().join("r"), Options::default(), "r");
    assert_eq!(store_contents(&restored), want);
    // A closed store is refused.
    drop(reader);
    let db = Db::open(&live, Options::default()).unwrap();
    let closed = db.clone();
    db.close().unwrap();
    assert!(matches!(
        engine.create_backup(&closed),
        Err(Error::Closed(_))
    ));
}
