//! Conveniences over Gets and scans (`contains_key`, `first_key_value`, `last_key_value`, with
//! their snapshot forms) and the store's size (`approximate_len`, `disk_space`).

use std::fs;
use std::io;

use crate::db::version::filename::{parse_file_name, FileKind};
use crate::db::{Db, Snapshot};
use crate::error::Result;
use crate::fs::io_at;
use crate::options::NUM_LEVELS;

impl Db {
    /// Whether `key` is present: written and not deleted since. A value found in a table is not
    /// copied out of its block.
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// db.put("k", "v")?;
    /// assert!(db.contains_key("k")?);
    /// db.delete("k")?;
    /// assert!(!db.contains_key("k")?);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`get`](Db::get).
    pub fn contains_key(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        Ok(self.get_pinned(key)?.is_some())
    }

    /// Whether `key` was present when `snapshot` was taken.
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// let before = db.snapshot();
    /// db.put("k", "v")?;
    /// assert!(!db.contains_key_at(&before, "k")?);
    /// assert!(db.contains_key_at(&db.snapshot(), "k")?);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`get`](Db::get).
    ///
    /// # Panics
    /// If `snapshot` was taken from another `Db`.
    pub fn contains_key_at(&self, snapshot: &Snapshot, key: impl AsRef<[u8]>) -> Result<bool> {
        Ok(self.get_pinned_at(snapshot, key)?.is_some())
    }

    /// The live entry with the smallest key, or `None` in an empty store.
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// assert_eq!(db.first_key_value()?, None);
    /// db.put("b", "2")?;
    /// db.put("a", "1")?;
    /// assert_eq!(db.first_key_value()?, Some((b"a".to_vec(), b"1".to_vec())));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// `Error::Corruption` naming the file if a table it reads is damaged; `Error::Io` if one
    /// cannot be read; `Error::Closed` once the store is closed.
    pub fn first_key_value(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.iter().next().transpose()
    }

    /// The live entry with the smallest key when `snapshot` was taken.
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// db.put("b", "2")?;
    /// let snapshot = db.snapshot();
    /// db.put("a", "1")?;
    /// assert_eq!(db.first_key_value_at(&snapshot)?, Some((b"b".to_vec(), b"2".to_vec())));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`first_key_value`](Db::first_key_value).
    ///
    /// # Panics
    /// If `snapshot` was taken from another `Db`.
    pub fn first_key_value_at(&self, snapshot: &Snapshot) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.iter_at(snapshot).next().transpose()
    }

    /// The live entry with the largest key, or `None` in an empty store.
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// db.put("a", "1")?;
    /// db.put("b", "2")?;
    /// assert_eq!(db.last_key_value()?, Some((b"b".to_vec(), b"2".to_vec())));
    /// db.delete("b")?;
    /// assert_eq!(db.last_key_value()?, Some((b"a".to_vec(), b"1".to_vec())));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`first_key_value`](Db::first_key_value).
    pub fn last_key_value(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.iter().next_back().transpose()
    }

    /// The live entry with the largest key when `snapshot` was taken.
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// db.put("a", "1")?;
    /// let snapshot = db.snapshot();
    /// db.put("b", "2")?;
    /// assert_eq!(db.last_key_value_at(&snapshot)?, Some((b"a".to_vec(), b"1".to_vec())));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`first_key_value`](Db::first_key_value).
    ///
    /// # Panics
    /// If `snapshot` was taken from another `Db`.
    pub fn last_key_value_at(&self, snapshot: &Snapshot) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.iter_at(snapshot).next_back().transpose()
    }

    /// An estimate of the number of keys (of the default keyspace; on a
    /// [`Keyspace`](crate::Keyspace), of that keyspace), read from what the store keeps in
    /// memory: the entries of the memtables plus the entry counts the tables' properties record.
    ///
    /// It counts entries, not keys: until compaction merges them, a key written several times
    /// counts once per version, and a deletion counts as an entry too (while the key it deletes
    /// still counts where it lies). So it is high after overwrites and deletions, never low;
    /// after [`compact`](Db::compact) with no snapshot live it is exact. A table that cannot be
    /// read counts nothing (the read that needs it reports the error). A closed store counts 0.
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// for i in 0..100u32 {
    ///     db.put(i.to_be_bytes(), "v")?;
    /// }
    /// db.put(7u32.to_be_bytes(), "w")?; // an overwrite: a second version of key 7
    /// db.delete(8u32.to_be_bytes())?; // a deletion: an entry too
    /// assert_eq!(db.approximate_len(), 102); // the memtable's entries
    /// db.compact()?;
    /// assert_eq!(db.approximate_len(), 99); // exact once compacted
    /// # Ok(()) }
    /// ```
    pub fn approximate_len(&self) -> u64 {
        let inner = &self.inner;
        if inner.is_closed() {
            return 0;
        }
        let sv = self.tree.super_version();
        let memtables: usize = std::iter::once(&sv.mem)
            .chain(&sv.imm)
            .map(|m| m.len())
            .sum();
        let tables: u64 = sv
            .version
            .levels
            .iter()
            .flatten()
            .filter_map(|f| {
                self.tree
                    .tables
                    .get(f)
                    .ok()
                    .map(|t| t.properties().num_entries)
            })
            .sum();
        memtables as u64 + tables
    }

    /// The bytes the store's live files take on disk: the tables of every keyspace (those of the
    /// current versions) and the WAL files. Tables that only a snapshot, scan or cursor still holds, the MANIFEST
    /// and the small files (CURRENT, LOCK) are not counted.
    ///
    /// ```
    /// # fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = siftdb::Db::open(dir.path(), siftdb::Options::default())?;
    /// db.put("k", vec![7u8; 10_000])?;
    /// assert!(db.disk_space()? >= 10_000); // in the WAL
    /// db.flush()?;
    /// assert!(db.disk_space()? > 0); // in a table now (compressed)
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// `Error::Io` naming the directory if it cannot be listed, or a WAL whose size cannot be
    /// read; `Error::Closed` once the store is closed.
    pub fn disk_space(&self) -> Result<u64> {
        let inner = &self.inner;
        inner.check_open()?;
        let tables: u64 = inner
            .trees()
            .iter()
            .map(|t| {
                let version = t.super_version().version.clone();
                (0..NUM_LEVELS).map(|l| version.level_bytes(l)).sum::<u64>()
            })
            .sum();
        let mut wals = 0;
        for entry in fs::read_dir(&inner.dir).map_err(io_at(&inner.dir))? {
            let entry = entry.map_err(io_at(&inner.dir))?;
            let name = entry.file_name();
            let Some(FileKind::Log(_)) = name.to_str().and_then(parse_file_name) else {
                continue;
            };
            match entry.metadata() {
                Ok(m) => wals += m.len(),
                // Removed meanwhile: its memtable was flushed into a table.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_at(&entry.path())(e)),
            }
        }
        Ok(tables + wals)
    }
}
