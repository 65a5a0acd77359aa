//! A damaged MANIFEST never costs data. Open either recovers every acknowledged write or refuses
//! with `Error::Corruption`, and when it refuses it leaves every file as it found it.
//!
//! The store under test has flushed and compacted (so the MANIFEST's last records are edits the
//! store acted on: WALs and tables removed after them) and holds synced writes in its WAL. Its
//! MANIFEST is then cut at every length and has every byte flipped over its last records. A torn
//! tail that no removal followed (an append a crash interrupted) must still open.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::{copy_dir, manifest, scratch};
use siftdb::{Db, Error, Options, WriteBatch, WriteOptions};

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
