//! A damaged MANIFEST never costs data. Open either recovers every acknowledged write or refuses
//! with `Error::Corruption`, and when it refuses it leaves every file as it found it.
//!
//! The first store under test has flushed and compacted (so the MANIFEST's last records are edits
//! the store acted on: WALs and tables removed after them) and holds synced writes in its WAL. Its
//! MANIFEST is then cut at every length and has every byte flipped over its last records. A torn
//! tail that no removal followed (an append a crash interrupted) must still open.
//!
//! The second holds several keyspaces, flushed, dropped, created again under a dropped name and
//! written in the WAL alone; its MANIFEST is cut at every length and every byte is flipped, as
//! written and as the snapshot an open rewrites. A damaged MANIFEST that lost the records of a
//! keyspace must not open without it (nor remove its tables): the keyspace's tables and WAL writes
//! tell. So must a table no record explains, such as another store's.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::{copy_dir, manifest, scratch};
use siftdb::{Db, Error, Keyspace, Options, WriteBatch, WriteOptions};

/// Small memtables and tables, so that a few hundred kilobytes make many flushes and compactions.
fn options() -> Options {
    Options::default()
        .write_buffer_size(64 << 10)
        .target_file_size(32 << 10)
        .max_bytes_for_level_base(128 << 10)
        .level0_compaction_trigger(2)
}

fn key(i: usize) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: usize, round: usize) -> Vec<u8> {
    format!("value {i} of round {round} ")
        .repeat(4)
        .into_bytes()
}

/// Builds the store in `dir` and returns what it holds: 3,000 keys written, flushed and compacted
/// in rounds (the MANIFEST ends with flush and compaction edits whose WALs and input tables are
/// gone), then 200 synced writes (puts and deletes) that only the WAL holds.
fn build(dir: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model = BTreeMap::new();
    let db = Db::open(dir, options()).unwrap();
    for round in 0..3 {
        for i in (round * 500)..(round * 500 + 1500) {
            db.put(key(i), value(i, round)).unwrap();
            model.insert(key(i), value(i, round));
        }
        db.flush().unwrap();
    }
    db.compact().unwrap();
    for i in 3000..3300 {
        db.put(key(i), value(i, 9)).unwrap();
        model.insert(key(i), value(i, 9));
    }
    db.flush().unwrap();
    let synced = WriteOptions::new().sync(true);
    for i in 0..200 {
        let mut batch = WriteBatch::new();
        if i % 5 == 0 {
            batch.delete(key(i * 7));
            model.remove(&key(i * 7));
        } else {
            batch.put(key(i * 11), value(i, 10));
            model.insert(key(i * 11), value(i, 10));
        }
        db.write_opt(batch, &synced).unwrap();
    }
    let tables_in_l0: usize = db
        .property("siftdb.num-files-at-level0")
        .unwrap()
        .parse()
        .unwrap();
    assert!(tables_in_l0 >= 1, "the last flush's table is in L0");
    // Dropped, not closed: a close would not change the files, and the WAL keeps the synced writes.
    drop(db);
    model
}

/// Every file's name and bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().into_string().unwrap(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .filter(|(name, _)| name != "LOCK")
        .collect()
}

/// Opens the damaged store in `dir`: Ok with every acknowledged write (and nothing else), or
/// `Corruption` with every file as it was. Returns whether it opened.
fn open_checked(dir: &Path, model: &BTreeMap<Vec<u8>, Vec<u8>>, what: &str) -> bool {
    let before = files(dir);
    match Db::open(dir, options()) {
        Ok(db) => {
            let got: Vec<(Vec<u8>, Vec<u8>)> = db
                .scan(..)
                .collect::<siftdb::Result<_>>()
                .unwrap_or_else(|e| panic!("{what}: scan failed: {e}"));
            let want: Vec<(Vec<u8>, Vec<u8>)> =
                model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            if got != want {
                let missing = want.iter().filter(|kv| !got.contains(kv)).count();
                panic!(
                    "{what}: opened with {} entries, {missing} acknowledged ones missing or \
                     wrong, of {}",
                    got.len(),
                    want.len()
                );
            }
            true
        }
        Err(Error::Corruption { file, what: why }) => {
            assert!(
                file.starts_with(dir),
                "{what}: the error names {}",
                file.display()
            );
            let after = files(dir);
            assert!(
                before == after,
                "{what}: refused ({why}) but changed the files: {:?} -> {:?}",
                before.keys().collect::<Vec<_>>(),
                after.keys().collect::<Vec<_>>()
            );
            false
        }
        Err(e) => panic!("{what}: expected success or Corruption, got {e}"),
    }
}

/// A pristine store and the files of its damaged copies.
struct Fixture {
    _root: tempfile::TempDir,
    base: PathBuf,
    work: PathBuf,
    model: BTreeMap<Vec<u8>, Vec<u8>>,
}

fn fixture() -> Fixture {
    let root = scratch();
    let base = root.path().join("base");
    let work = root.path().join("work");
    let model = build(&base);
    Fixture {
        _root: root,
        base,
        work,
        model,
    }
}

impl Fixture {
    /// A fresh copy of the store with its MANIFEST replaced by `damage(bytes)`; the MANIFEST's path.
    fn damaged(&self, damage: impl FnOnce(&mut Vec<u8>)) -> PathBuf {
        copy_dir(&self.base, &self.work);
        let path = manifest(&self.work);
        let mut bytes = std::fs::read(&path).unwrap();
        damage(&mut bytes);
        std::fs::write(&path, &bytes).unwrap();
        path
    }
}

/// How many bytes at the end of the MANIFEST the sweeps damage: its last records (every byte of
/// it with `SIFTDB_LONG=1`).
fn sweep_len(manifest_len: usize) -> usize {
    if common::long() {
        manifest_len
    } else {
        manifest_len.min(600)
    }
}

#[test]
fn manifest_cut_by_one_byte_with_synced_writes_in_the_wal_is_corruption_and_deletes_nothing() {
    let f = fixture();
    let path = f.damaged(|b| {
        b.pop();
    });
    let before = files(&f.work);
    let Err(Error::Corruption { file, what }) = Db::open(&f.work, options()) else {
        panic!("a cut that loses an acted-on edit must be refused")
    };
    assert_eq!(file, path, "{what}");
    assert!(what.contains(".log"), "names the missing WAL: {what}");
    assert_eq!(files(&f.work), before, "nothing deleted or written");
    // Read-only opens refuse it too (they would show the store minus its newest writes).
    assert!(matches!(
        Db::open_read_only(&f.work, options()),
        Err(Error::Corruption { .. })
    ));
}

#[test]
fn manifest_tail_cut_at_every_length_opens_whole_or_is_refused_untouched() {
    let f = fixture();
    let len = std::fs::metadata(manifest(&f.base)).unwrap().len() as usize;
    let (mut opened, mut refused) = (0, 0);
    for cut in 1..=sweep_len(len) {
        f.damaged(|b| b.truncate(len - cut));
        if open_checked(&f.work, &f.model, &format!("cut {cut} of {len} bytes")) {
            opened += 1;
        } else {
            refused += 1;
        }
    }
    eprintln!("tail cuts: {opened} opened whole, {refused} refused");
    assert!(refused > 0, "the sweep reached edits the store acted on");
}

#[test]
fn manifest_byte_flipped_over_its_last_records_opens_whole_or_is_refused_untouched() {
    let f = fixture();
    let len = std::fs::metadata(manifest(&f.base)).unwrap().len() as usize;
    let (mut opened, mut refused) = (0, 0);
    for at in (len - sweep_len(len))..len {
        for mask in [0x01u8, 0x80, 0xff] {
            f.damaged(|b| b[at] ^= mask);
            let what = format!("byte {at} of {len} xor {mask:#04x}");
            if open_checked(&f.work, &f.model, &what) {
                opened += 1;
            } else {
                refused += 1;
            }
        }
    }
    eprintln!("byte flips: {opened} opened whole, {refused} refused");
    assert!(refused > 0);
}

/// A crash during an append leaves part of an edit at the end: nothing acted on it, so the store
/// opens with every write.
#[test]
fn torn_edit_that_nothing_acted_on_opens_with_every_write() {
    let f = fixture();
    // A FULL record's header announcing 100 bytes, and 20 of them: an append stopped midway
    // (the MANIFEST is far smaller than one 32 KiB block, so the header fits in its block).
    f.damaged(|b| {
        assert!(b.len() + 127 < 32 << 10);
        b.extend_from_slice(&[0x12, 0x34, 0x56, 0x78, 100, 0, 1]);
        b.extend_from_slice(&[0x42; 20]);
    });
    assert!(open_checked(&f.work, &f.model, "torn unacknowledged edit"));
}

/// The length of the first record of the log `bytes` (a MANIFEST's snapshot of the store's
/// counters and default keyspace): a FULL fragment's 7-byte header and its payload.
fn first_record_len(bytes: &[u8]) -> usize {
    assert_eq!(bytes[6], 1, "the first record is one FULL fragment");
    7 + usize::from(u16::from_le_bytes([bytes[4], bytes[5]]))
}

/// A MANIFEST cut right after its first record has lost the records that create every other
/// keyspace: the store must be refused, not opened without them (and their tables deleted).
#[test]
fn manifest_cut_after_its_first_record_is_refused_not_opened_without_a_keyspace() {
    let root = scratch();
    let dir = root.path().join("db");
    let db = Db::open(&dir, Options::default()).unwrap();
    let users = db.keyspace("users").unwrap();
    for i in 0..100 {
        users.put(key(i), value(i, 0)).unwrap();
    }
    db.put(b"in default", b"1").unwrap();
    users.flush().unwrap();
    db.flush().unwrap();
    drop(users);
    db.close().unwrap();
    // The reopen writes a fresh MANIFEST: its first record, then one creating `users`.
    Db::open(&dir, Options::default()).unwrap().close().unwrap();
    let path = manifest(&dir);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.truncate(first_record_len(&bytes));
    std::fs::write(&path, &bytes).unwrap();
    assert_refused_untouched(&dir, &[".sst", "users"]);
}

/// Opens the store in `dir` read-only or to write.
fn open_as(dir: &Path, read_only: bool) -> siftdb::Result<Db> {
    if read_only {
        Db::open_read_only(dir, Options::default())
    } else {
        Db::open(dir, Options::default())
    }
}

/// Asserts that opening the store in `dir`, read-only and to write, is `Error::Corruption` naming
/// its MANIFEST, with each of `named` in the message, and changes no file.
fn assert_refused_untouched(dir: &Path, named: &[&str]) {
    let (path, before) = (manifest(dir), files(dir));
    for read_only in [true, false] {
        match open_as(dir, read_only) {
            Err(Error::Corruption { file, what }) => {
                assert_eq!(file, path, "read-only {read_only}: {what}");
                for n in named {
                    assert!(what.contains(n), "read-only {read_only}: {what}");
                }
            }
            Ok(db) => panic!(
                "read-only {read_only}: opened, with keyspaces {:?}",
                db.keyspace_names()
            ),
            Err(e) => panic!("read-only {read_only}: {e}"),
        }
        assert!(files(dir) == before, "read-only {read_only}: files changed");
    }
}

/// A table that no record names and that is no leftover of this store (another store's, copied in
/// under a number this one never used) is refused, read-only too, and never removed.
#[test]
fn a_table_no_record_explains_is_refused_and_kept() {
    let root = scratch();
    let (ours, theirs) = (root.path().join("ours"), root.path().join("theirs"));
    for dir in [&ours, &theirs] {
        let db = Db::open(dir, Options::default()).unwrap();
        db.put(b"k", dir.to_str().unwrap()).unwrap();
        db.flush().unwrap();
        db.close().unwrap();
    }
    let foreign = common::files_with_ext(&theirs, "sst").remove(0);
    std::fs::copy(&foreign, ours.join("900000.sst")).unwrap();
    assert_refused_untouched(&ours, &["900000.sst"]);
    std::fs::remove_file(ours.join("900000.sst")).unwrap();
    let db = Db::open(&ours, Options::default()).unwrap();
    assert_eq!(
        db.get(b"k").unwrap(),
        Some(ours.to_str().unwrap().as_bytes().to_vec())
    );
}

/// The acknowledged contents of every live keyspace, by name.
type Keyspaces = BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>;

/// Writes 30 keys to `ks` (synced, so that the last ones stand in the WAL however the store
/// stops) and records them in `model`.
fn fill(ks: &Keyspace, model: &mut Keyspaces, tag: &str) {
    let contents = model.entry(ks.name().to_string()).or_default();
    let synced = WriteOptions::new().sync(true);
    for i in 0..30 {
        let v = format!("{tag} {i}").into_bytes();
        let mut batch = WriteBatch::new();
        batch.put_in(ks, key(i), &v);
        ks.write_opt(batch, &synced).unwrap();
        contents.insert(key(i), v);
    }
}

/// Drops keyspace `name`, creates it again, fills and flushes it.
fn drop_and_create_again(db: &Db, model: &mut Keyspaces, name: &str) {
    db.drop_keyspace(name).unwrap();
    model.remove(name);
    let ks = db.keyspace(name).unwrap();
    fill(&ks, model, &format!("{name} again"));
    ks.flush().unwrap();
}

/// Builds a store of several keyspaces in `dir` and returns what each holds. Its first life
/// creates and flushes keyspaces, drops one and creates it again; the reopen writes a MANIFEST
/// that snapshots them all; the second life creates, flushes and drops more, and leaves writes
/// to an old keyspace and to a new one in the WAL alone; its last edit, a flush whose WAL the
/// others keep, is one nothing acted on. So the MANIFEST holds, in order: the snapshot,
/// creations, flushes, drops, creations under a dropped name and that flush.
fn build_keyspaces(dir: &Path) -> Keyspaces {
    let mut model = Keyspaces::new();
    let db = Db::open(dir, Options::default()).unwrap();
    fill(&db.default_keyspace(), &mut model, "default");
    for name in ["a", "b", "c"] {
        let ks = db.keyspace(name).unwrap();
        fill(&ks, &mut model, &format!("{name} first"));
        ks.flush().unwrap();
    }
    db.flush().unwrap();
    drop_and_create_again(&db, &mut model, "b");
    fill(&db.keyspace("d").unwrap(), &mut model, "d in the WAL");
    db.close().unwrap();

    let db = Db::open(dir, Options::default()).unwrap();
    let e = db.keyspace("e").unwrap();
    fill(&e, &mut model, "e");
    e.flush().unwrap();
    db.drop_keyspace("c").unwrap();
    model.remove("c");
    drop_and_create_again(&db, &mut model, "d");
    fill(&db.keyspace("a").unwrap(), &mut model, "a in the WAL");
    fill(&db.keyspace("f").unwrap(), &mut model, "f in the WAL");
    fill(&e, &mut model, "e again");
    e.flush().unwrap();
    drop(e);
    db.close().unwrap();
    model
}

/// Opens the damaged store in `dir` (read-only, or to write): Ok with every acknowledged key of
/// every live keyspace, exactly, or `Corruption` with every file as it was. Returns whether it
/// opened.
fn open_keyspaces_checked(dir: &Path, model: &Keyspaces, read_only: bool, what: &str) -> bool {
    let what = format!("{what}, read-only {read_only}");
    let before = files(dir);
    match open_as(dir, read_only) {
        Ok(db) => {
            let names = db.keyspace_names();
            for (name, want) in model {
                assert!(
                    names.contains(name),
                    "{what}: opened without keyspace {name} (it has {names:?})"
                );
                let got: BTreeMap<Vec<u8>, Vec<u8>> = db
                    .keyspace(name)
                    .unwrap()
                    .iter()
                    .collect::<siftdb::Result<_>>()
                    .unwrap_or_else(|e| panic!("{what}: scan of {name} failed: {e}"));
                assert!(
                    got == *want,
                    "{what}: keyspace {name} opened with {} entries, {} acknowledged",
                    got.len(),
                    want.len()
                );
            }
            true
        }
        Err(Error::Corruption { file, what: why }) => {
            assert!(file.starts_with(dir), "{what}: names {}", file.display());
            assert!(
                files(dir) == before,
                "{what}: refused ({why}) but changed the files"
            );
            false
        }
        Err(e) => panic!("{what}: expected success or Corruption, got {e}"),
    }
}

/// The masks each byte of the MANIFEST is flipped with: one per byte, in turn (all three with
/// `SIFTDB_LONG=1`).
fn masks_at(at: usize) -> Vec<u8> {
    const MASKS: [u8; 3] = [0x01, 0x80, 0xff];
    if common::long() {
        MASKS.to_vec()
    } else {
        vec![MASKS[at % MASKS.len()]]
    }
}

/// Cuts the MANIFEST of the store in `base` at every length and flips each of its bytes (see
/// [`masks_at`]), opening each copy read-only and to write, and checks each open against `model`.
/// Returns how many opened and how many were refused.
fn sweep_keyspaces_manifest(base: &Path, work: &Path, model: &Keyspaces) -> (usize, usize) {
    let path = manifest(base);
    let (len, pristine) = (
        std::fs::metadata(&path).unwrap().len() as usize,
        std::fs::read(&path).unwrap(),
    );
    let path = work.join(path.file_name().unwrap());
    let (mut opened, mut refused) = (0, 0);
    // A refused open leaves every file as it was (which the check asserts): the next case then
    // only needs its own MANIFEST. An open that succeeds changes the store: copied again.
    let mut changed = true;
    let mut try_open = |damage: &dyn Fn(&mut Vec<u8>), what: &str| {
        for read_only in [true, false] {
            if changed {
                copy_dir(base, work);
            }
            let mut bytes = pristine.clone();
            damage(&mut bytes);
            std::fs::write(&path, &bytes).unwrap();
            changed = open_keyspaces_checked(work, model, read_only, what);
            if changed {
                opened += 1;
            } else {
                refused += 1;
            }
        }
    };
    for cut in 1..=len {
        try_open(
            &|b| b.truncate(len - cut),
            &format!("cut {cut} of {len} bytes"),
        );
    }
    for at in 0..len {
        for mask in masks_at(at) {
            let what = format!("byte {at} of {len} xor {mask:#04x}");
            try_open(&|b| b[at] ^= mask, &what);
        }
    }
    eprintln!("a MANIFEST of {len} bytes: {opened} opens whole, {refused} refused");
    (opened, refused)
}

/// Every cut and every flipped byte of the MANIFEST of a store of several keyspaces (flushed,
/// dropped, created again under a dropped name, written in the WAL alone): each open, read-only
/// or not, holds every acknowledged key of every live keyspace, or is refused with every file
/// unchanged. None may open without a keyspace whose records the damage took, though the WAL
/// holds its writes.
#[test]
fn keyspaces_manifest_cut_or_flipped_anywhere_opens_whole_or_is_refused_untouched() {
    let root = scratch();
    let (base, work) = (root.path().join("base"), root.path().join("work"));
    let model = build_keyspaces(&base);
    let (opened, refused) = sweep_keyspaces_manifest(&base, &work, &model);
    assert!(
        opened > 0 && refused > 0,
        "the tail's last edit opens whole when cut"
    );
}

/// The same store opened once more: its MANIFEST is the snapshot of every keyspace an open writes,
/// and every keyspace's data is in its tables alone (the WALs are gone). A cut or flip that loses
/// a keyspace's records leaves only its tables to tell, and they must: no open without it, and
/// no table removed.
#[test]
fn keyspaces_snapshot_cut_or_flipped_anywhere_never_opens_without_a_keyspace_held_in_tables() {
    let root = scratch();
    let (base, work) = (root.path().join("base"), root.path().join("work"));
    let model = build_keyspaces(&base);
    Db::open(&base, Options::default())
        .unwrap()
        .close()
        .unwrap();
    assert!(
        common::names_with_ext(&base, "log").len() == 1,
        "one WAL, empty"
    );
    let (_, refused) = sweep_keyspaces_manifest(&base, &work, &model);
    assert!(refused > 0);
}
