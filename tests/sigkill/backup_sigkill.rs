//! SIGKILL during backups: a real child process, killed at a random moment.
//!
//! The child opens a store with 16 KiB memtables (so flushes and compactions run all the time)
//! and a backup directory; one thread writes `key(i)` for `i` = 0, 1, 2, … without sync, and
//! the main thread takes backup after backup, printing `start <a>` before each (`a`: the writes
//! acknowledged so far) and `backup <id>` after, and keeping the newest three (`purge_old`), so
//! kills land in copies, in metadata writes and in purges. The parent kills it after 20–300 ms,
//! opens the backup directory and checks, for every backup there:
//!
//! - it verifies (every file there, every checksum right);
//! - its restore opens and holds exactly `key(0..m)`, each with its value, for some `m` at least
//!   the `a` printed before it was taken (a backup holds every write acknowledged before its
//!   creation); a backup the child was killed while taking is there only if whole.
//!
//! Then a new child goes on with the same store (from the writes it recovered) and the same backup
//! directory; every fifth kill, with new ones. Short mode (plain `cargo test`): 15 kills.
//! `SIFTDB_LONG=1`: 300; `SIFTDB_BACKUP_KILLS=n`: any number.

use crate::common;
use common::child::{key, options, parse_key, run_child_lines, spawn_lock, test_name, value};
use common::{env_number, long, scratch};

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::{rngs::StdRng, Rng, SeedableRng};
use siftdb::{BackupEngine, BackupId, Db};

const CHILD_ENV: &str = "SIFTDB_BACKUP_CRASH_CHILD";
const START_ENV: &str = "SIFTDB_BACKUP_CRASH_START";

/// Child side: never returns normally while the parent is alive; it is killed.
#[test]
fn backup_crash_child() {
    let Ok(root) = std::env::var(CHILD_ENV) else {
        return; // Not a child: nothing to do in a normal test run.
    };
    let root = Path::new(&root);
    let start: u64 = std::env::var(START_ENV).unwrap().parse().unwrap();
    let db = Db::open(root.join("live"), options(0)).unwrap();
    let mut engine = BackupEngine::open(root.join("backups")).unwrap();
    let acked = Arc::new(AtomicU64::new(start));
    {
        let (db, acked) = (db.clone(), Arc::clone(&acked));
        std::thread::spawn(move || {
            for i in start.. {
                db.put(key(i), value(i)).unwrap();
                acked.store(i + 1, Ordering::Release);
            }
        });
    }
    let mut out = std::io::stdout().lock();
    loop {
        writeln!(out, "start {}", acked.load(Ordering::Acquire)).unwrap();
        out.flush().unwrap();
        let id = engine.create_backup(&db).unwrap();
        writeln!(out, "backup {id}").unwrap();
        out.flush().unwrap();
        engine.purge_old(3).unwrap();
    }
}

/// Kills per store and backup directory.
const KILLS_PER_STORE: usize = 5;

fn kills() -> usize {
    env_number("SIFTDB_BACKUP_KILLS", if long() { 300 } else { 15 }) as usize
}

/// How many of `key(0)`, `key(1)`, … `db` holds in a row, with their values; panics at a hole
/// or a wrong value.
fn prefix_len(db: &Db, what: &str) -> u64 {
    let mut m = 0;
    for entry in db.iter() {
        let (k, v) = entry.unwrap();
        assert_eq!(parse_key(&k), m, "{what}: a hole before {m}");
        assert_eq!(v, value(m), "{what}: wrong value of key {m}");
        m += 1;
    }
    m
}

#[test]
fn sigkill_during_backups_and_purges_leaves_every_backup_whole() {
    let kills = kills();
    let mut rng = StdRng::seed_from_u64(0xbac0_0009);
    // On tmpfs where there is one: every backup and restore fsyncs each file.
    let scratch_dir = scratch();
    let restores = scratch_dir.path().join("restores");
    // Each backup there, and the writes acknowledged before it was taken.
    let mut holds: BTreeMap<BackupId, u64> = BTreeMap::new();
    let (mut start, mut whole_unreported, mut checked) = (0, 0, 0);
    let mut root = scratch_dir.path().to_path_buf();
    for kill in 0..kills {
        // A new store and backup directory every few kills bounds what each check restores.
        if kill.is_multiple_of(KILLS_PER_STORE) {
            root = scratch_dir.path().join(format!("store{kill}"));
            (start, holds) = (0, BTreeMap::new());
        }
        let delay = Duration::from_millis(rng.gen_range(20..300));
        let env = [
            (CHILD_ENV, root.display().to_string()),
            (START_ENV, start.to_string()),
        ];
        let mut attempt = None;
        for line in run_child_lines(
            &test_name(module_path!(), "backup_crash_child"),
            &env,
            delay,
        ) {
            // The first follows the test harness's `test backup_crash_child ... ` on its line.
            if let Some((_, a)) = line.rsplit_once("start ") {
                attempt = Some(a.parse::<u64>().unwrap());
            } else if let Some(id) = line.strip_prefix("backup ") {
                let id: BackupId = id.parse().unwrap();
                holds.insert(id, attempt.take().unwrap());
            }
        }
        let _guard = spawn_lock();
        let what = format!("kill {kill}");
        let db = Db::open(root.join("live"), options(0)).unwrap();
        start = prefix_len(&db, &what);
        drop(db);
        let engine = BackupEngine::open(root.join("backups")).unwrap();
        assert!(engine.damaged().is_empty(), "{what}");
        let listed: Vec<BackupId> = engine.list().iter().map(|b| b.id).collect();
        for &id in &listed {
            if let std::collections::btree_map::Entry::Vacant(slot) = holds.entry(id) {
                // Made whole just before the kill, which came before `backup <id>` was printed.
                let a = attempt
                    .take()
                    .unwrap_or_else(|| panic!("{what}: backup {id} was never begun"));
                slot.insert(a);
                whole_unreported += 1;
            }
        }
        holds.retain(|id, _| listed.contains(id));
        for (&id, &before) in &holds {
            let what = format!("{what}, backup {id}");
            engine.verify(id).unwrap_or_else(|e| panic!("{what}: {e}"));
            let target = restores.join(format!("{kill}-{id}"));
            engine.restore(id, &target).unwrap();
            let db = Db::open(&target, options(0)).unwrap();
            let m = prefix_len(&db, &what);
            assert!(
                m >= before,
                "{what}: {before} writes were acknowledged before it was taken, it holds {m}"
            );
            drop(db);
            std::fs::remove_dir_all(&target).unwrap();
            checked += 1;
        }
    }
    assert!(checked > 0, "no backup was ever made");
    eprintln!(
        "backup SIGKILLs: {kills}, {checked} backups restored and checked, {whole_unreported} \
         made whole just before a kill; {start} writes in the last store"
    );
}
