//! `Db::checkpoint`: an openable copy of the store at one moment, made while writes go on.
//!
//! The memtable is flushed first, so the copy needs no WAL: it is the tables of one version
//! (hard-linked where the file system allows, copied otherwise) and a fresh MANIFEST naming them
//! with the sequence they hold. Tables are immutable once named by a version, and the version is
//! held while they are linked, so no compaction can delete one under the copy.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::db::flush::{table_options, write_level0_table};
use crate::db::version::edit::VersionEdit;
use crate::db::version::filename::table_path;
use crate::db::version::manifest::{Manifest, ManifestCounters};
use crate::db::Db;
use crate::error::{Error, Result};
use crate::fs::{io_at, FileSystem};

impl Db {
    /// Writes a consistent copy of the store into directory `dir`, which can then be opened as a
    /// store of its own (with [`open`](Db::open) or [`open_read_only`](Db::open_read_only)),
    /// while writes to this store go on.
    ///
    /// **What it holds.** The copy is the state of the store after the writes numbered up to
    /// some sequence `S`, where `S` is at least the sequence of every write acknowledged before
    /// `checkpoint` was called: it holds every write that returned `Ok` before the call, none
    /// that started after the call returned, and of the writes made during the call, a prefix in
    /// commit order (batches whole, no holes). It holds no snapshot's older versions beyond what
    /// its tables happen to keep.
    ///
    /// **How.** The memtable is flushed first (as [`flush`](Db::flush) does), then the tables of
    /// the newest version are hard-linked into `dir` (copied and fsynced where links fail: another
    /// file system, or none supported), and a fresh MANIFEST naming them and CURRENT are written
    /// and fsynced, CURRENT last; `dir` and its parent are fsynced. The copy holds no WAL and no
    /// `LOCK`, and shares this store's identity, so its tables (the same files, when linked) are
    /// its own. Linked tables take no space until one of the two stores compacts them away.
    /// Flushing first costs a small L0 table per checkpoint but makes the copy need no WAL: one
    /// being appended cannot be copied at a record boundary without stopping writes, and a copy
    /// made of immutable files alone is consistent by construction.
    ///
    /// `dir` must not exist: it is created (with any missing parents), and may not lie inside
    /// this store's directory. If the checkpoint fails, what it wrote is removed, the directories
    /// it created too, and nothing else; an interrupted one (a crash) leaves no CURRENT, which an
    /// open refuses rather than mistake for a store.
    ///
    /// On a store opened read-only nothing is flushed: what the WALs held is written as one table
    /// of the copy instead, so the copy holds everything the reader sees.
    ///
    /// ```
    /// use siftdb::{Db, Options};
    ///
    /// # fn main() -> siftdb::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path().join("live"), Options::default())?;
    /// db.put(b"k", b"before")?;
    /// db.checkpoint(dir.path().join("copy"))?;
    /// db.put(b"k", b"after")?;
    ///
    /// let copy = Db::open(dir.path().join("copy"), Options::default())?;
    /// assert_eq!(copy.get(b"k")?, Some(b"before".to_vec()));
    /// assert_eq!(db.get(b"k")?, Some(b"after".to_vec()));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// - `Error::InvalidArgument` if `dir` is empty, exists (even as an empty directory), or lies
    ///   inside this store's directory;
    /// - `Error::Background` if the store's background work failed earlier (the flush cannot be
    ///   made);
    /// - `Error::Io` naming the file for operating-system failures (in `dir` or reading a table);
    /// - `Error::Closed` if the store is closed (then `dir` is left alone).
    pub fn checkpoint(&self, dir: impl AsRef<Path>) -> Result<()> {
        let inner = &self.inner;
        let dir = dir.as_ref();
        // Holding `LOCK` while the tables are linked: a close meanwhile lets no other store in to
        // remove them.
        let _lock = inner.hold_lock()?;
        let created = create_target(&inner.fs, &inner.dir, dir)?;
        let mut made = Vec::new();
        let result = self.write_checkpoint(dir, &mut made);
        if let Err(e) = &result {
            log::error!(
                "siftdb {}: checkpoint into {} failed: {e}",
                inner.dir.display(),
                dir.display()
            );
            // Best effort: remove what this call made, and nothing else.
            for path in made.iter().rev() {
                let _ = inner.fs.remove_file(path);
            }
            remove_created(&inner.fs, &created);
        }
        result
    }

    fn write_checkpoint(&self, dir: &Path, made: &mut Vec<PathBuf>) -> Result<()> {
        let inner = &self.inner;
        if !inner.read_only {
            // Every keyspace's acknowledged writes into tables: the copy holds no WAL.
            for tree in inner.trees() {
                inner.flush_tree(&tree)?;
            }
        }
        // Every keyspace's version and the sequence their tables hold, taken together: the view
        // holds the versions, which keeps their tables from being deleted while they are linked.
        let view = self.copy_view(false)?;
        let mut linking = true;
        for f in view.tables() {
            let from = table_path(&inner.dir, f.number);
            let to = table_path(dir, f.number);
            link_or_copy(&inner.fs, &from, &to, &mut linking, made)?;
        }
        let (mut trees, counters) = (view.trees.clone(), view.counters);
        let mut last_sequence = counters.last_sequence;
        if inner.read_only {
            // The replayed WALs, which a reader keeps in memory, become one table per keyspace
            // of the copy.
            for live in inner.trees() {
                let sv = live.super_version();
                let Some(record) = trees.get_mut(&live.id) else {
                    continue;
                };
                if sv.mem.is_empty() {
                    continue;
                }
                let number = inner.new_file_number()?;
                let o = &*live.options();
                let keyspace = (live.id, live.name.as_str());
                let table = table_options(o, keyspace, 0, false, o.filter.clone(), inner.store_id);
                made.push(table_path(dir, number));
                let operator = o.merge_operator.as_ref();
                let added = write_level0_table(
                    &inner.fs,
                    dir,
                    number,
                    table,
                    &live.stats,
                    &[],
                    &sv.mem,
                    operator,
                )?;
                record.version = Arc::new(record.version.apply(&VersionEdit {
                    added: added.into_iter().collect(),
                    ..Default::default()
                }));
                last_sequence = inner
                    .last_sequence
                    .load(std::sync::atomic::Ordering::Acquire);
            }
        }
        // Past every table the copy names (the counter starts past every file of the store); no
        // WAL in the copy is needed.
        let number = inner.new_file_number()?;
        made.push(dir.join(crate::db::version::filename::manifest_name(number)));
        made.push(crate::db::version::filename::current_temp_path(dir));
        made.push(crate::db::version::filename::current_path(dir));
        for tree in trees.values_mut() {
            tree.log_number = number;
        }
        Manifest::create(
            &inner.fs,
            dir,
            number,
            trees,
            ManifestCounters {
                log_number: number,
                next_file_number: number + 1,
                last_sequence,
                log_start_sequence: last_sequence,
                next_keyspace_id: counters.next_keyspace_id,
            },
            inner.store_id,
        )?;
        Ok(())
    }
}

/// Creates the checkpoint's directory `dir`, which must not exist yet, with any missing parents,
/// and syncs every directory that gained an entry. Returns the directories it created, outermost
/// first, so that a failed checkpoint removes just those.
///
/// # Errors
/// `Error::InvalidArgument` for an empty `dir`, one that exists (a directory, empty or not, or a
/// file), or one inside the store's directory `store` (its files would mix with the store's, and
/// the next open would take them for its own).
fn create_target(fs: &FileSystem, store: &Path, dir: &Path) -> Result<Vec<PathBuf>> {
    if dir.as_os_str().is_empty() {
        return Err(Error::InvalidArgument(
            "the checkpoint's directory is an empty path: name a new directory".into(),
        ));
    }
    match std::fs::symlink_metadata(dir) {
        Ok(_) => {
            return Err(Error::InvalidArgument(format!(
                "checkpoint directory {} already exists: name a new one",
                dir.display()
            )))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_at(dir)(e)),
    }
    // The directories to create, innermost first, and the one that exists above them.
    let mut missing = vec![dir.to_path_buf()];
    let mut existing = None;
    for ancestor in dir.ancestors().skip(1) {
        let ancestor = if ancestor.as_os_str().is_empty() {
            Path::new(".")
        } else {
            ancestor
        };
        match std::fs::symlink_metadata(ancestor) {
            Ok(_) => {
                existing = Some(ancestor);
                break;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => missing.push(ancestor.to_path_buf()),
            Err(e) => return Err(io_at(ancestor)(e)),
        }
    }
    let existing = existing.unwrap_or(Path::new("/"));
    let resolved = std::fs::canonicalize(existing).map_err(io_at(existing))?;
    let store_resolved = std::fs::canonicalize(store).map_err(io_at(store))?;
    if resolved.starts_with(&store_resolved) {
        return Err(Error::InvalidArgument(format!(
            "checkpoint directory {} is inside the store's directory {}",
            dir.display(),
            store.display()
        )));
    }
    missing.reverse();
    let mut created = Vec::new();
    for d in &missing {
        if let Err(e) = fs.create_dir(d) {
            remove_created(fs, &created);
            return Err(e);
        }
        created.push(d.clone());
    }
    // Each new entry durable: the existing directory's, then those of the new parents.
    let parents = std::iter::once(existing).chain(created.iter().map(|d| d.as_path()));
    for parent in parents.take(created.len()) {
        if let Err(e) = fs.sync_dir(parent) {
            remove_created(fs, &created);
            return Err(e);
        }
    }
    Ok(created)
}

/// Removes the directories `create_target` made (outermost first in `created`), innermost
/// first; best effort.
fn remove_created(fs: &FileSystem, created: &[PathBuf]) {
    for d in created.iter().rev() {
        let _ = fs.remove_dir(d);
    }
}

/// Hard-links table `from` as `to`, or copies it (and fsyncs the copy) if linking fails; after one
/// failed link (`*linking` turns false) every later table is copied.
fn link_or_copy(
    fs: &FileSystem,
    from: &Path,
    to: &Path,
    linking: &mut bool,
    made: &mut Vec<PathBuf>,
) -> Result<()> {
    if *linking {
        match fs.hard_link(from, to) {
            Ok(()) => {
                made.push(to.to_path_buf());
                return Ok(());
            }
            Err(Error::Io(e)) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(Error::Io(e));
            }
            Err(e) => {
                log::debug!(
                    "checkpoint: cannot hard-link {} ({e}); copying tables",
                    from.display()
                );
                *linking = false;
            }
        }
    }
    let mut source = File::open(from).map_err(io_at(from))?;
    let mut copy = fs.create(to)?;
    made.push(to.to_path_buf());
    // A write error already names the copy; a read error is named after the source.
    io::copy(&mut source, &mut copy).map_err(io_at(from))?;
    copy.sync()
}
