//! Taking a backup: the store's pinned view (its tables, and its WALs with their lengths, noted
//! during a short pause of the writers), copied outside the pause into files shared by every
//! backup that holds the same bytes, then the metadata naming them, written last.

use std::collections::HashSet;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::time::SystemTime;

use super::copy::Source;
use super::metadata::BackupMeta;
use super::names::{meta_path, temp_path, StoreFile, TEMP_SUFFIX};
use super::{BackupEngine, BackupId};
use crate::db::version::filename::{log_path, manifest_name, table_path, FileKind};
use crate::db::Db;
use crate::error::{Error, Result};
use crate::fs::io_at;

impl BackupEngine {
    /// Backs up the store `db` while it runs, and returns the new backup's id.
    ///
    /// **What it holds.** Every write acknowledged before the call (returned `Ok`), synced or
    /// not, in every keyspace, and of the writes made during the call a prefix in commit order
    /// (batches whole): exactly the writes committed when the writers paused. Opening its
    /// [restore](Self::restore) replays the WALs as stood then, as recovery after a crash at
    /// that moment would.
    ///
    /// **How.** Writers pause while the engine hands the WAL's buffered records to the OS and
    /// notes every keyspace's tables (the versions are held, so compaction deletes none of them
    /// meanwhile) and the WALs the store still needs with their lengths (held open, so a flush
    /// that removes one meanwhile does not take its bytes away). Then, beside the writers, each
    /// table is copied unless a file of the same name, size and CRC-32 is already in the
    /// directory (its checksum is computed by reading the table, copying nothing); each WAL's
    /// prefix the same way; a fresh MANIFEST naming those tables and WALs; then the metadata
    /// file, last. Every file is fsynced before it is renamed into place, and the directory
    /// before the metadata names them.
    ///
    /// If it fails, the files it added are removed and no backup is recorded.
    ///
    /// # Errors
    /// - `Error::Closed` if the store is closed;
    /// - `Error::Corruption` naming a table of the store whose size is not the one its MANIFEST
    ///   records;
    /// - `Error::Io` naming the file that cannot be read, written, synced or renamed (a failure
    ///   to hand the WAL's records to the OS is also the store's background error, as a failed
    ///   write is);
    /// - `Error::InvalidArgument` once 2^32 − 1 backups have been numbered.
    pub fn create_backup(&mut self, db: &Db) -> Result<BackupId> {
        let newest = self
            .backups
            .keys()
            .chain(self.damaged.keys())
            .max()
            .copied();
        let id = match newest {
            None => 1,
            Some(n) => n.checked_add(1).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "backup {n} in {} is the last number there is",
                    self.dir.display()
                ))
            })?,
        };
        let mut made = Vec::new();
        match self.write_backup(db, id, &mut made) {
            Ok(meta) => {
                self.backups.insert(id, meta);
                Ok(id)
            }
            Err(e) => {
                log::error!(
                    "backup of {} into {} failed: {e}",
                    db.path().display(),
                    self.dir.display()
                );
                // Best effort: what is left is removed by the next open.
                for path in made.iter().rev() {
                    let _ = self.fs.remove_file(path);
                }
                Err(e)
            }
        }
    }

    /// Copies what the backup needs and writes its metadata; `made` gets every file it adds.
    fn write_backup(&self, db: &Db, id: BackupId, made: &mut Vec<PathBuf>) -> Result<BackupMeta> {
        let held = Held::new(self.backups.values().flat_map(|b| &b.files));
        let view = db.copy_view(true)?;
        let created_ms = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let mut buf = Vec::new();
        let mut files = Vec::new();
        for table in view.tables() {
            let path = table_path(view.store_dir(), table.number);
            let file = File::open(&path).map_err(io_at(&path))?;
            let size = file.metadata().map_err(io_at(&path))?.len();
            if size != table.size {
                return Err(Error::corruption(
                    &path,
                    format!(
                        "the table is {size} bytes, the MANIFEST says {}",
                        table.size
                    ),
                ));
            }
            let name = FileKind::Table(table.number).name();
            let source = Source::File {
                file: &file,
                path: &path,
                len: size,
            };
            files.push(self.share(name, &source, &held, &mut buf, made)?);
        }
        for wal in &view.wals {
            let path = log_path(view.store_dir(), wal.number);
            let source = Source::File {
                file: &wal.file,
                path: &path,
                len: wal.len,
            };
            let name = FileKind::Log(wal.number).name();
            files.push(self.share(name, &source, &held, &mut buf, made)?);
        }
        let number = view.new_file_number()?;
        let manifest = view.manifest_contents(number);
        let source = Source::Bytes(&manifest);
        files.push(self.share(manifest_name(number), &source, &held, &mut buf, made)?);
        let meta = BackupMeta {
            id,
            created_ms,
            store_id: view.store_id(),
            sequence: view.last_sequence,
            files,
        };
        // Let the store delete what it no longer needs.
        drop(view);
        // Every name the metadata gives durable before the metadata is.
        self.fs.sync_dir(&self.dir)?;
        let path = meta_path(&self.dir, id);
        let temp = temp_path(&path);
        made.push(temp.clone());
        let mut out = self.fs.create(&temp)?;
        out.write_all(&meta.encode()).map_err(Error::Io)?;
        out.sync()?;
        drop(out);
        self.fs.rename(&temp, &path)?;
        made.push(path);
        self.fs.sync_dir(&self.dir)?;
        Ok(meta)
    }

    /// The shared file holding `source`, the store's file `name`: one a backup already holds
    /// (same name, size and checksum, and still there), else a new copy, added to `made`.
    fn share(
        &self,
        name: String,
        source: &Source<'_>,
        held: &Held,
        buf: &mut Vec<u8>,
        made: &mut Vec<PathBuf>,
    ) -> Result<StoreFile> {
        let size = source.len();
        if held.has_name_and_size(&name, size) {
            let shared = StoreFile {
                crc: source.checksum(buf)?,
                name: name.clone(),
                size,
            };
            if held.files.contains(&shared) && self.dir.join(shared.shared_name()).is_file() {
                return Ok(shared);
            }
        }
        let temp = self.dir.join(format!("{name}{TEMP_SUFFIX}"));
        made.push(temp.clone());
        let crc = source.write_to(&self.fs, &temp, buf)?;
        let shared = StoreFile { name, size, crc };
        let path = self.dir.join(shared.shared_name());
        self.fs.rename(&temp, &path)?;
        if !held.files.contains(&shared) {
            made.push(path);
        }
        Ok(shared)
    }
}

/// The files the backups already in the directory hold.
struct Held {
    files: HashSet<StoreFile>,
    /// Their names and sizes: only a store file matching one of them is worth a checksum
    /// before it is copied.
    sized: HashSet<(String, u64)>,
}

impl Held {
    fn new<'a>(files: impl Iterator<Item = &'a StoreFile>) -> Held {
        let files: HashSet<StoreFile> = files.cloned().collect();
        let sized = files.iter().map(|f| (f.name.clone(), f.size)).collect();
        Held { files, sized }
    }

    fn has_name_and_size(&self, name: &str, size: u64) -> bool {
        self.sized.contains(&(name.to_string(), size))
    }
}
