//! `TableWriter`: a table built outside the store, in the store's own table format, for
//! [`Db::ingest`]. It is the store's table builder (`src/sst/table_builder.rs`) fed keys in
//! order, each once, every entry at sequence 0; the table records the `siftdb.external` property
//! and number 0 (`docs/table_format.md`, *Properties block*), and the store assigns it one
//! sequence when it ingests it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::clock::{unix_seconds, Clock};
use crate::db::flush::table_options;
use crate::db::ttl::{append_stamp, expiry_time};
use crate::db::version::filename::parse_file_name;
use crate::db::Db;
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::key::{append_internal_key, ValueKind};
use crate::options::NUM_LEVELS;
use crate::sst::table_builder::TableBuilder;
use crate::write_batch::{MAX_KEY_BYTES, MAX_VALUE_BYTES};

/// Writes a table for [`Db::ingest`] outside the store: keys in strictly increasing order,
/// each once, as values or tombstones. Get one from [`Db::table_writer`] (on a
/// [`Keyspace`](crate::Keyspace), for that keyspace): the table carries the keyspace's filter
/// (its layout and policy at the keyspace's default bits per key, since the level it lands in is
/// known only at ingest), range filter, prefix extractor, block size and the codec of its deepest
/// level (where a bulk load into a store that does not hold its range lands), and the store's
/// identity and the keyspace's id, which ingest checks.
///
/// In a keyspace with a [`ttl`](crate::Options::ttl), a value expires that long after its
/// [`put`](TableWriter::put), by the store's clock, as a put to the store would.
///
/// Dropped before [`finish`](TableWriter::finish) succeeds, it removes its partial file.
///
/// ```
/// use siftdb::{Db, Options};
///
/// # fn main() -> siftdb::Result<()> {
/// let dir = tempfile::tempdir()?;
/// let db = Db::open(dir.path().join("store"), Options::default())?;
/// let mut writer = db.table_writer(dir.path().join("batch.sst"))?;
/// for i in 0..1000u32 {
///     writer.put(format!("key{i:06}"), format!("value {i}"))?;
/// }
/// let table = writer.finish()?;
/// assert_eq!(table.entries, 1000);
/// db.ingest(&[&table.path])?;
/// assert_eq!(db.get(b"key000042")?, Some(b"value 42".to_vec()));
/// # Ok(())
/// # }
/// ```
pub struct TableWriter {
    /// `None` once an I/O error ended the table (the builder removed its file).
    builder: Option<TableBuilder>,
    path: PathBuf,
    /// The last user key added, for the order check.
    last: Option<Vec<u8>>,
    smallest: Vec<u8>,
    /// The internal key and stamped value of the entry being added, reused.
    ikey: Vec<u8>,
    value: Vec<u8>,
    stamp: Stamp,
    clock: Arc<dyn Clock>,
}

/// What a keyspace's puts stamp on their values (`db/ttl.rs`).
#[derive(Debug, Clone, Copy)]
enum Stamp {
    None,
    /// Values expire this many seconds after they are put.
    Expiry(u64),
    /// Values carry their write time (keyspaces made with a TTL by older stores).
    WriteTime,
}

/// A finished table, ready for [`Db::ingest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalTable {
    /// Where it is.
    pub path: PathBuf,
    /// Its smallest and largest keys.
    pub smallest_key: Vec<u8>,
    /// See `smallest_key`.
    pub largest_key: Vec<u8>,
    /// Its entries: values and tombstones.
    pub entries: u64,
    /// Its size in bytes.
    pub file_size: u64,
}

impl Db {
    /// A [`TableWriter`] creating the table file `path` (which must not exist) for this store's
    /// keyspace (the default one; on a [`Keyspace`](crate::Keyspace), that one), for
    /// [`ingest`](Db::ingest).
    ///
    /// # Errors
    /// `Error::InvalidArgument` if the keyspace was dropped or `path` is in the store's
    /// directory under the name of a store file; `Error::Io` naming `path` if it cannot be
    /// created (`AlreadyExists` if it is there).
    pub fn table_writer(&self, path: impl AsRef<Path>) -> Result<TableWriter> {
        let path = path.as_ref();
        self.inner.check_open()?;
        self.tree.check_live()?;
        let in_store = path.parent().is_some_and(|p| p == self.inner.dir.as_path());
        let store_name = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(parse_file_name);
        if in_store && store_name.is_some() {
            return Err(Error::InvalidArgument(format!(
                "{}: a table to ingest may not take the name of a store file in the store's \
                 directory",
                path.display()
            )));
        }
        let options = self.tree.options();
        let keyspace = (self.tree.id, self.tree.name.as_str());
        let mut table = table_options(
            &options,
            keyspace,
            NUM_LEVELS - 1,
            true,
            options.filter.clone(),
            self.inner.store_id,
        );
        // The caller's writes, not the store's: no share of its rate limit.
        table.pacer = None;
        let mut builder = TableBuilder::create(&FileSystem::default(), path, 0, table)?;
        builder.mark_external();
        let stamp = if self.tree.write_times {
            Stamp::WriteTime
        } else {
            match self.tree.ttl_seconds() {
                0 => Stamp::None,
                ttl => Stamp::Expiry(ttl),
            }
        };
        Ok(TableWriter {
            builder: Some(builder),
            path: path.to_path_buf(),
            last: None,
            smallest: Vec::new(),
            ikey: Vec::new(),
            value: Vec::new(),
            stamp,
            clock: Arc::clone(&self.tree.clock),
        })
    }
}

impl TableWriter {
    /// Adds `key` with `value`. Keys must come in strictly increasing (bytewise) order.
    ///
    /// # Errors
    /// `Error::InvalidArgument` for a key not past the last one (nothing is added, and the table
    /// can go on), a key over [`MAX_KEY_BYTES`](crate::MAX_KEY_BYTES) or a value over
    /// [`MAX_VALUE_BYTES`](crate::MAX_VALUE_BYTES), or a writer an earlier I/O error ended;
    /// `Error::Io` naming the file if a write fails (the partial file is removed).
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let (key, value) = (key.as_ref(), value.as_ref());
        if value.len() > MAX_VALUE_BYTES {
            return Err(Error::InvalidArgument(format!(
                "{}: a value of {} bytes is over the largest, {MAX_VALUE_BYTES}",
                self.path.display(),
                value.len()
            )));
        }
        let (kind, stamp) = match self.stamp {
            Stamp::None => return self.add(key, ValueKind::Value, value),
            Stamp::Expiry(ttl) => (
                ValueKind::ExpiringValue,
                expiry_time(unix_seconds(self.clock.as_ref()), ttl),
            ),
            Stamp::WriteTime => (ValueKind::Value, unix_seconds(self.clock.as_ref())),
        };
        let mut stamped = std::mem::take(&mut self.value);
        stamped.clear();
        stamped.extend_from_slice(value);
        append_stamp(&mut stamped, stamp);
        let added = self.add(key, kind, &stamped);
        self.value = stamped;
        added
    }

    /// Adds a tombstone for `key`: once ingested, it hides every older version of the key.
    /// Keys must come in strictly increasing (bytewise) order.
    ///
    /// # Errors
    /// As [`put`](TableWriter::put).
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> Result<()> {
        self.add(key.as_ref(), ValueKind::Deletion, &[])
    }

    fn add(&mut self, key: &[u8], kind: ValueKind, value: &[u8]) -> Result<()> {
        if key.len() > MAX_KEY_BYTES {
            return Err(Error::InvalidArgument(format!(
                "{}: a key of {} bytes is over the largest, {MAX_KEY_BYTES}",
                self.path.display(),
                key.len()
            )));
        }
        if let Some(last) = &self.last
            && key <= last.as_slice()
        {
            return Err(Error::InvalidArgument(format!(
                "{}: keys must come in strictly increasing order: {} after {}",
                self.path.display(),
                shown(key),
                shown(last)
            )));
        }
        let builder = self.builder.as_mut().ok_or_else(|| ended(&self.path))?;
        self.ikey.clear();
        append_internal_key(&mut self.ikey, key, 0, kind);
        if let Err(e) = builder.add(&self.ikey, value) {
            self.builder = None; // removes the partial file
            return Err(e);
        }
        if self.last.is_none() {
            self.smallest = key.to_vec();
        }
        let last = self.last.get_or_insert_with(Vec::new);
        last.clear();
        last.extend_from_slice(key);
        Ok(())
    }

    /// Entries added so far.
    pub fn entries(&self) -> u64 {
        self.builder.as_ref().map_or(0, TableBuilder::num_entries)
    }

    /// Writes the rest of the table, fsyncs it and its directory, and says what it holds.
    ///
    /// # Errors
    /// `Error::InvalidArgument` for a table with no entry (nothing to ingest; the file is
    /// removed) or a writer an I/O error ended; `Error::Io` naming the file if a write or fsync
    /// fails (the partial file is removed).
    pub fn finish(mut self) -> Result<ExternalTable> {
        let builder = self.builder.take().ok_or_else(|| ended(&self.path))?;
        let Some(largest) = self.last.take() else {
            return Err(Error::InvalidArgument(format!(
                "{}: a table with no entry has nothing to ingest",
                self.path.display()
            )));
        };
        let entries = builder.num_entries();
        let summary = builder.finish()?;
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            FileSystem::default().sync_dir(dir)?;
        }
        Ok(ExternalTable {
            path: std::mem::take(&mut self.path),
            smallest_key: std::mem::take(&mut self.smallest),
            largest_key: largest,
            entries,
            file_size: summary.file_size,
        })
    }
}

/// The error of a writer an earlier I/O error ended.
fn ended(path: &Path) -> Error {
    Error::InvalidArgument(format!(
        "{}: the table was abandoned after a failed write",
        path.display()
    ))
}

/// A key for a message: its first 64 bytes, escaped.
fn shown(key: &[u8]) -> String {
    let head: String = key
        .iter()
        .take(64)
        .flat_map(|&b| std::ascii::escape_default(b))
        .map(char::from)
        .collect();
    if key.len() > 64 {
        format!("\"{head}\"… ({} bytes)", key.len())
    } else {
        format!("\"{head}\"")
    }
}
