//! Power cuts during backups, purges and restores, through the fault-injection layer
//! (`siftdb::fault_injection`) under the backup directory or the restore's target.
//!
//! A store of two keyspaces with 4 KiB memtables and tables (so a backup copies a dozen tables
//! and WALs) takes writes, some flushed, none synced; then the machine stops at a random
//! operation of a backup, a purge (`purge_old` or `delete`) or a restore, and the power goes
//! (each file keeps its fsynced bytes and none, a prefix or zeros of the rest; each name changed
//! since the last directory fsync keeps one of its states), or one time in seven only the
//! process crashes. The backup directory is then opened again, sometimes cut again inside that
//! open (its clean-up removes files), and checked:
//!
//! - every backup there before a backup or a purge is still there, unless the purge removed it;
//!   a backup whose call returned `Ok` is there; a cut backup is absent or there;
//! - no backup is damaged, every backup verifies (every file there, every checksum right), and
//!   restores as the store was when it was taken (the backups checked in turn, newest always);
//! - an interrupted restore leaves a directory without CURRENT, which `Db::open` refuses, or
//!   the whole store; a finished one the whole store.
//!
//! A new store and backup directory every 100 cuts. And a case random cuts seldom reach: a purge
//! stopped at the directory sync that makes its metadata removal durable, the process crashing,
//! the next open stopped while it removes that backup's files, then the power going, under 24
//! seeds.
//!
//! Short mode (plain `cargo test`): 60 cuts of each. `SIFTDB_LONG=1`: 2,000;
//! `SIFTDB_BACKUP_CUTS=n`: any number.

use crate::common;
use common::backups::{store_contents, Contents};
use common::noise;
use common::power_cuts::{power_fails, tiny_options, Tally};
use common::{env_number, file_names, long, scratch};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use siftdb::fault_injection::{FaultInjector, OpKind, PowerCut};
use siftdb::{BackupEngine, BackupId, Db, Error, Options};

fn cuts() -> usize {
    env_number("SIFTDB_BACKUP_CUTS", if long() { 2000 } else { 60 }) as usize
}

/// A store of two keyspaces whose writes are never synced.
struct Store {
    db: Db,
    next: u64,
}

impl Store {
    fn open(dir: &Path) -> Store {
        let db = Db::open(dir, tiny_options()).unwrap();
        db.keyspace_with("other", tiny_options().write_buffer_size(8192))
            .unwrap();
        Store { db, next: 0 }
    }

    /// A few dozen writes over both keyspaces, sometimes flushed.
    fn write(&mut self, rng: &mut StdRng) {
        let other = self.db.keyspace("other").unwrap();
        for _ in 0..rng.gen_range(10..80) {
            let k = format!("k{:06}", rng.gen_range(0..self.next + 50));
            let v = noise(self.next, rng.gen_range(10..300));
            if rng.gen_bool(0.5) {
                self.db.put(&k, v).unwrap();
            } else {
                other.put(&k, v).unwrap();
            }
            self.next += 1;
        }
        if rng.gen_bool(0.2) {
            self.db.flush().unwrap();
        }
    }
}

/// Opens the backup directory through `faults`, now and then cut inside the open (whose
/// clean-up removes files) and the machine failed again first.
fn reopen(dir: &Path, faults: &FaultInjector, rng: &mut StdRng, tally: &mut Tally) -> BackupEngine {
    for attempt in 0.. {
        if attempt < 2 && rng.gen_bool(0.3) {
            faults.cut_after(rng.gen_range(0..6), Box::new(|_| true));
        }
        match BackupEngine::open_with_faults(dir, faults.clone()) {
            Ok(engine) if !faults.is_dead() => {
                faults.revive(); // disarms a cut open did not reach
                return engine;
            }
            Ok(engine) => drop(engine),
            Err(e) => assert!(faults.is_dead(), "open failed without a cut: {e}"),
        }
        tally.in_open += 1;
        power_fails(faults, rng, tally);
    }
    unreachable!()
}

/// Checks that the backups of `engine` are exactly those of `expected` (ids and what each must
/// hold): none damaged, each verifies; restores the newest and one other into `scratch_dir`.
fn check(
    engine: &BackupEngine,
    expected: &BTreeMap<BackupId, Contents>,
    rng: &mut StdRng,
    scratch_dir: &Path,
    what: &str,
) {
    assert!(
        engine.damaged().is_empty(),
        "{what}: {:?}",
        engine.damaged()
    );
    let listed: Vec<BackupId> = engine.list().iter().map(|b| b.id).collect();
    assert_eq!(
        listed,
        expected.keys().copied().collect::<Vec<_>>(),
        "{what}"
    );
    for &id in &listed {
        engine
            .verify(id)
            .unwrap_or_else(|e| panic!("{what}: backup {id} does not verify: {e}"));
    }
    let mut restore = vec![*listed.last().unwrap()];
    restore.push(listed[rng.gen_range(0..listed.len())]);
    restore.dedup();
    for id in restore {
        let target = scratch_dir.join(format!("restore-{}", rng.r#gen::<u64>()));
        engine.restore(id, &target).unwrap();
        let db = Db::open(&target, tiny_options()).unwrap();
        assert_eq!(
            &store_contents(&db),
            &expected[&id],
            "{what}: backup {id} restores another store"
        );
        drop(db);
        std::fs::remove_dir_all(&target).unwrap();
    }
}

/// Cuts per store and backup directory: a new pair now and then bounds what each check restores.
const CUTS_PER_EPOCH: usize = 100;

/// A store, and a backup directory the fault-injection layer follows with the backups it must
/// hold.
struct Epoch {
    dir: PathBuf,
    store: Store,
    backups: PathBuf,
    faults: FaultInjector,
    /// `None` only while the machine is down.
    engine: Option<BackupEngine>,
    expected: BTreeMap<BackupId, Contents>,
}

impl Epoch {
    fn new(root: &Path, cut: usize) -> Epoch {
        let dir = root.join(format!("epoch-{cut}"));
        let backups = dir.join("backups");
        let faults = FaultInjector::new(&backups).unwrap();
        let engine = BackupEngine::open_with_faults(&backups, faults.clone()).unwrap();
        Epoch {
            store: Store::open(&dir.join("live")),
            dir,
            backups,
            faults,
            engine: Some(engine),
            expected: BTreeMap::new(),
        }
    }

    fn engine(&mut self) -> &mut BackupEngine {
        self.engine.as_mut().unwrap()
    }

    /// Takes a backup no cut is armed for and records what it holds; returns the operations it
    /// took.
    fn backup(&mut self) -> u64 {
        let ops = self.faults.ops();
        let id = self.engine.as_mut().unwrap().create_backup(&self.store.db);
        self.expected
            .insert(id.unwrap(), store_contents(&self.store.db));
        self.faults.ops() - ops
    }

    /// The machine fails (the engine dropped first), then the directory is opened again.
    fn fail_and_reopen(&mut self, rng: &mut StdRng, tally: &mut Tally) {
        self.engine = None;
        power_fails(&self.faults, rng, tally);
        self.engine = Some(reopen(&self.backups, &self.faults, rng, tally));
    }

    /// The next epoch's, when `cut` starts one: this one's files are removed.
    fn next(self, root: &Path, cut: usize) -> Epoch {
        if !cut.is_multiple_of(CUTS_PER_EPOCH) {
            return self;
        }
        let dir = self.dir.clone();
        drop(self);
        std::fs::remove_dir_all(dir).unwrap();
        Epoch::new(root, cut)
    }
}

#[test]
fn a_power_cut_during_a_backup_leaves_the_earlier_backups_whole_and_the_new_one_absent_or_whole() {
    let root = scratch();
    let mut rng = StdRng::seed_from_u64(0xbac0_0001);
    let mut tally = Tally::default();
    let (mut absent, mut whole) = (0, 0);
    let mut e = Epoch::new(root.path(), 0);
    // About the operations a backup takes (those of the last one not cut, or more once one was):
    // most cuts land inside the next one, some after it.
    let mut backup_ops = 0;
    for cut in 0..cuts() {
        e = e.next(root.path(), cut);
        if e.expected.is_empty() {
            e.store.write(&mut rng);
            backup_ops = e.backup();
        }
        let what = format!("cut {cut}");
        e.store.write(&mut rng);
        let want = store_contents(&e.store.db);
        e.faults
            .cut_after(rng.gen_range(0..backup_ops * 5 / 4 + 1), Box::new(|_| true));
        let ops = e.faults.ops();
        let made = e.engine.as_mut().unwrap().create_backup(&e.store.db);
        backup_ops = match e.faults.is_dead() {
            false => e.faults.ops() - ops,
            // This one took more: aim further next time.
            true => backup_ops + backup_ops / 4 + 1,
        };
        e.fail_and_reopen(&mut rng, &mut tally);
        let listed: Vec<BackupId> = e.engine().list().iter().map(|b| b.id).collect();
        let new: Vec<BackupId> = listed
            .iter()
            .copied()
            .filter(|id| !e.expected.contains_key(id))
            .collect();
        assert!(new.len() <= 1, "{what}: {listed:?}");
        if let Ok(id) = made {
            assert_eq!(new, [id], "{what}: a backup that returned Ok is gone");
        }
        match new.first() {
            Some(&id) => {
                whole += 1;
                e.expected.insert(id, want);
            }
            None => absent += 1,
        }
        check(
            e.engine.as_ref().unwrap(),
            &e.expected,
            &mut rng,
            root.path(),
            &what,
        );
        if e.expected.len() > 4 {
            e.engine().purge_old(3).unwrap();
            while e.expected.len() > 3 {
                e.expected.pop_first();
            }
        }
    }
    assert!(absent > 0 && whole > 0, "absent {absent}, whole {whole}");
    eprintln!(
        "backup cuts: {} ({absent} left no backup, {whole} a whole one), {} cut again in the \
         next open, {} process crashes, {} bytes lost, {} names reverted",
        cuts(),
        tally.in_open,
        tally.process_crashes,
        tally.bytes_lost,
        tally.names_reverted
    );
}

#[test]
fn a_power_cut_during_a_purge_leaves_no_backup_naming_a_missing_file() {
    let root = scratch();
    let mut rng = StdRng::seed_from_u64(0xbac0_0002);
    let mut tally = Tally::default();
    let mut removed = 0;
    let mut e = Epoch::new(root.path(), 0);
    for cut in 0..cuts() {
        e = e.next(root.path(), cut);
        let what = format!("cut {cut}");
        while e.expected.len() < 5 {
            e.store.write(&mut rng);
            e.backup();
        }
        let ids: Vec<BackupId> = e.expected.keys().copied().collect();
        e.faults.cut_after(rng.gen_range(0..25), Box::new(|_| true));
        // The backups the call must keep, and those it may remove.
        let (kept, doomed): (Vec<BackupId>, Vec<BackupId>) = if rng.gen_bool(0.5) {
            let keep = rng.gen_range(0..4);
            let (old, new) = ids.split_at(ids.len() - keep);
            let _ = e.engine().purge_old(keep);
            (new.to_vec(), old.to_vec())
        } else {
            let id = ids[rng.gen_range(0..ids.len())];
            let _ = e.engine().delete(id);
            (ids.iter().copied().filter(|&i| i != id).collect(), vec![id])
        };
        e.fail_and_reopen(&mut rng, &mut tally);
        let listed: Vec<BackupId> = e.engine().list().iter().map(|b| b.id).collect();
        for id in &kept {
            assert!(listed.contains(id), "{what}: kept backup {id} is gone");
        }
        for id in doomed {
            if !listed.contains(&id) {
                e.expected.remove(&id);
                removed += 1;
            }
        }
        if e.expected.is_empty() {
            assert!(listed.is_empty(), "{what}");
            continue;
        }
        check(
            e.engine.as_ref().unwrap(),
            &e.expected,
            &mut rng,
            root.path(),
            &what,
        );
    }
    assert!(removed > 0);
    eprintln!(
        "purge cuts: {}, {removed} backups removed, {} cut again in the next open, {} process \
         crashes, {} names reverted",
        cuts(),
        tally.in_open,
        tally.process_crashes,
        tally.names_reverted
    );
}

#[test]
fn a_power_cut_during_a_restore_leaves_no_store_or_the_whole_backup() {
    let root = scratch();
    let backups = root.path().join("backups");
    let mut rng = StdRng::seed_from_u64(0xbac0_0003);
    let mut tally = Tally::default();
    let mut store = Store::open(&root.path().join("live"));
    let mut engine = BackupEngine::open(&backups).unwrap();
    let mut expected = Vec::new();
    for _ in 0..3 {
        store.write(&mut rng);
        store.write(&mut rng);
        let id = engine.create_backup(&store.db).unwrap();
        expected.push((id, store_contents(&store.db)));
    }
    let (mut refused, mut whole) = (0, 0);
    for cut in 0..cuts() {
        let what = format!("cut {cut}");
        let (id, want) = &expected[rng.gen_range(0..expected.len())];
        let target = root.path().join(format!("target-{cut}"));
        let faults = FaultInjector::new(&target).unwrap();
        faults.cut_after(rng.gen_range(0..80), Box::new(|_| true));
        let restored = engine.restore_with_faults(*id, &target, faults.clone());
        power_fails(&faults, &mut rng, &mut tally);
        let has_current = file_names(&target).iter().any(|n| n == "CURRENT");
        assert!(
            restored.is_err() || has_current,
            "{what}: no CURRENT after Ok"
        );
        match Db::open(&target, tiny_options().create_if_missing(false)) {
            Ok(db) => {
                assert!(has_current, "{what}: opened a store without CURRENT");
                assert_eq!(&store_contents(&db), want, "{what}: a partial store opened");
                whole += 1;
            }
            Err(Error::Corruption { .. } | Error::InvalidArgument(_)) if !has_current => {
                refused += 1;
            }
            Err(e) => panic!("{what}: {e}"),
        }
        std::fs::remove_dir_all(&target).unwrap();
    }
    assert!(refused > 0 && whole > 0, "refused {refused}, whole {whole}");
    // Nothing a restore did touched the backups.
    for (id, want) in &expected {
        engine.verify(*id).unwrap();
        let target = root.path().join(format!("final-{id}"));
        engine.restore(*id, &target).unwrap();
        let db = Db::open(&target, Options::default()).unwrap();
        assert_eq!(&store_contents(&db), want);
    }
}

#[test]
fn a_purge_cut_before_its_directory_sync_then_a_crash_in_the_next_open_loses_no_file_of_a_backup() {
    // The purge removes the older backup's metadata, and the machine stops at the directory
    // sync that would make the removal durable; the process dies. The next open finds the
    // backup gone and removes its files, and the machine stops there too; then the power goes.
    // Unless that open made what it saw durable first, the metadata could come back without
    // its files.
    let root = scratch();
    let mut rng = StdRng::seed_from_u64(0xbac0_0004);
    let mut store = Store::open(&root.path().join("live"));
    for seed in 0..24u64 {
        let backups = root.path().join(format!("backups-{seed}"));
        let faults = FaultInjector::new(&backups).unwrap();
        let mut engine = BackupEngine::open_with_faults(&backups, faults.clone()).unwrap();
        let mut expected = BTreeMap::new();
        for _ in 0..2 {
            store.write(&mut rng);
            store.db.flush().unwrap();
            let id = engine.create_backup(&store.db).unwrap();
            expected.insert(id, store_contents(&store.db));
        }
        faults.cut_after(0, Box::new(|s| s.kind == OpKind::SyncDir));
        assert!(engine.purge_old(1).is_err());
        drop(engine);
        faults.revive();
        faults.cut_after(1, Box::new(|s| s.kind == OpKind::Remove));
        assert!(BackupEngine::open_with_faults(&backups, faults.clone()).is_err());
        faults.power_cut(PowerCut::random(seed)).unwrap();
        let engine = BackupEngine::open_with_faults(&backups, faults.clone()).unwrap();
        expected.retain(|id, _| engine.list().iter().any(|b| b.id == *id));
        check(
            &engine,
            &expected,
            &mut rng,
            root.path(),
            &format!("seed {seed}"),
        );
    }
}
