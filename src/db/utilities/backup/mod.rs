//! Backups: [`BackupEngine`] keeps incremental backups of a store in a directory of their own,
//! verifies and restores them.
//!
//! `create.rs` takes one (a short pause of the writers, then copies outside it), `restore.rs` and
//! `verify.rs` read one back (`held.rs`: a file one holds, checked), `garbage.rs` removes what no
//! backup names, `metadata.rs` is the file that describes one, `names.rs` the names in the
//! directory, `copy.rs` the checksummed copy. Formats: `docs/log_format.md`, *Backup directories*.

mod copy;
mod create;
mod garbage;
mod held;
mod metadata;
mod names;
mod restore;
mod verify;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::db::dir_lock::LockedFile;
use crate::db::open::lock_exclusive;
use crate::error::{Error, Result};
use crate::fs::{io_at, FileSystem};
use metadata::BackupMeta;
use names::{meta_path, parse_backup_name, BackupFileKind};

/// A backup's number in its directory: 1 for the first, one more than the newest for each next
/// one. The number of a deleted backup comes back only if it was the newest.
pub type BackupId = u32;

/// One backup, as [`BackupEngine::list`] describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BackupInfo {
    /// Its number.
    pub id: BackupId,
    /// When it was taken (the writers' pause).
    pub created: SystemTime,
    /// The bytes of its files (tables, WAL prefixes, MANIFEST), shared with other backups or not:
    /// the size of the store it restores.
    pub size: u64,
    /// Its files.
    pub files: usize,
    /// The sequence of the newest write it holds: it holds every write committed before it was
    /// taken, and none after (see [`Snapshot::sequence`](crate::Snapshot::sequence)).
    pub sequence: u64,
}

/// Incremental backups of a store, kept in a directory of their own (RocksDB's `BackupEngine`).
///
/// [`create_backup`](Self::create_backup) copies a store while it runs: its tables, shared with
/// the backups already there (a table is immutable, so one copy serves every backup that holds
/// it: a second backup copies only the tables made since, and the WALs), and its WALs as they
/// stand, so a backup holds every write acknowledged before the call, synced or not. Writers
/// pause only while the engine notes the tables and the WALs' lengths; the copying goes on beside
/// them. [`restore`](Self::restore) writes a backup out as a store that [`Db::open`] opens;
/// [`verify`](Self::verify) checks every byte of one against the checksums recorded when it was
/// made; [`purge_old`](Self::purge_old) and [`delete`](Self::delete) remove backups and the files
/// no other backup holds.
///
/// **Durable.** A backup's metadata file is written last (a temporary, fsynced, renamed, the
/// directory fsynced), after every file it names is durable: a power cut or crash during a backup
/// leaves the earlier backups whole and the new one absent or whole. A purge removes metadata
/// first and files after, so no backup ever names a missing file; what an interrupted backup or
/// purge leaves behind is removed by the next [`open`](Self::open). The directory's `LOCK` is
/// held while the engine is open, so one engine at a time (in any process) changes it.
///
/// ```
/// use siftdb::{BackupEngine, Db, Options};
///
/// # fn main() -> siftdb::Result<()> {
/// let dir = tempfile::tempdir()?;
/// let db = Db::open(dir.path().join("live"), Options::default())?;
/// let mut backups = BackupEngine::open(dir.path().join("backups"))?;
///
/// db.put(b"k", b"first")?; // unsynced: still a backup holds it
/// let first = backups.create_backup(&db)?;
/// db.put(b"k", b"second")?;
/// let second = backups.create_backup(&db)?; // copies only what changed since `first`
/// assert_eq!(backups.list().len(), 2);
///
/// backups.verify(first)?;
/// backups.restore(first, dir.path().join("restored"))?;
/// let restored = Db::open(dir.path().join("restored"), Options::default())?;
/// assert_eq!(restored.get(b"k")?, Some(b"first".to_vec()));
///
/// backups.purge_old(1)?; // keeps the newest
/// assert_eq!(backups.list()[0].id, second);
/// # Ok(())
/// # }
/// ```
///
/// [`Db::open`]: crate::Db::open
pub struct BackupEngine {
    dir: PathBuf,
    /// Every change to the backup directory goes through it.
    fs: FileSystem,
    /// `LOCK`, held exclusively while the engine is open.
    _lock: LockedFile,
    /// Every backup whose metadata reads whole, by id.
    backups: BTreeMap<BackupId, BackupMeta>,
    /// Backups whose metadata file is damaged, and what is wrong with it.
    damaged: BTreeMap<BackupId, Error>,
}

impl BackupEngine {
    /// Opens the backup directory `dir`, creating it if it is missing, reads every backup's
    /// metadata, and removes what an interrupted backup or purge left (temporaries, files no
    /// backup names).
    ///
    /// A backup whose metadata file is damaged is left out of [`list`](Self::list) and named by
    /// [`damaged`](Self::damaged); [`verify`](Self::verify) and [`restore`](Self::restore) report
    /// it as `Error::Corruption`, and [`delete`](Self::delete) removes it. While one is there, no
    /// shared file is removed (which of them it holds is unknown).
    ///
    /// # Errors
    /// - `Error::InvalidArgument` if `dir` is empty or a file;
    /// - `Error::Locked` if another `BackupEngine`, in this process or another, has it open;
    /// - `Error::Io` naming the file for operating-system failures.
    pub fn open(dir: impl AsRef<Path>) -> Result<BackupEngine> {
        BackupEngine::open_with(dir.as_ref(), FileSystem::default())
    }

    /// [`open`](Self::open) through the fault-injection layer `injector` (which follows `dir`),
    /// for the crate's power-cut tests. Not an API.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    #[cfg(feature = "__fault-injection")]
    #[doc(hidden)]
    pub fn open_with_faults(
        dir: impl AsRef<Path>,
        injector: crate::fs::fault_injection::FaultInjector,
    ) -> Result<BackupEngine> {
        BackupEngine::open_with(dir.as_ref(), FileSystem::with_faults(Some(injector)))
    }

    fn open_with(dir: &Path, fs: FileSystem) -> Result<BackupEngine> {
        if dir.as_os_str().is_empty() {
            return Err(Error::InvalidArgument(
                "the backup directory's path is empty".into(),
            ));
        }
        match std::fs::metadata(dir) {
            Ok(m) if !m.is_dir() => {
                return Err(Error::InvalidArgument(format!(
                    "backup directory {} is not a directory",
                    dir.display()
                )))
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                fs.create_dir_all(dir)?;
                if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                    fs.sync_dir(parent)?;
                }
            }
            Err(e) => return Err(io_at(dir)(e)),
        }
        let lock = lock_exclusive(dir)?;
        let mut backups = BTreeMap::new();
        let mut damaged = BTreeMap::new();
        for entry in std::fs::read_dir(dir).map_err(io_at(dir))? {
            let entry = entry.map_err(io_at(dir))?;
            let name = entry.file_name();
            let Some(BackupFileKind::Meta(id)) = name.to_str().and_then(parse_backup_name) else {
                continue;
            };
            match BackupMeta::read(&entry.path(), id) {
                Ok(meta) => {
                    backups.insert(id, meta);
                }
                Err(e @ Error::Corruption { .. }) => {
                    log::warn!("backup {id} in {}: {e}", dir.display());
                    damaged.insert(id, e);
                }
                Err(e) => return Err(e),
            }
        }
        // What was just read may not be durable (an engine that crashed after removing a
        // backup's metadata, before syncing the directory): made durable before anything is
        // removed for it, so a power cut cannot bring back a backup whose files are gone.
        fs.sync_dir(dir)?;
        let engine = BackupEngine {
            dir: dir.to_path_buf(),
            fs,
            _lock: lock,
            backups,
            damaged,
        };
        engine.collect_garbage()?;
        Ok(engine)
    }

    /// The backup directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Every backup whose metadata reads whole, oldest first.
    pub fn list(&self) -> Vec<BackupInfo> {
        self.backups
            .values()
            .map(|b| BackupInfo {
                id: b.id,
                created: SystemTime::UNIX_EPOCH + Duration::from_millis(b.created_ms),
                size: b.files.iter().map(|f| f.size).sum(),
                files: b.files.len(),
                sequence: b.sequence,
            })
            .collect()
    }

    /// The backups whose metadata file is damaged (see [`open`](Self::open)), oldest first.
    pub fn damaged(&self) -> Vec<BackupId> {
        self.damaged.keys().copied().collect()
    }

    /// Deletes every backup but the newest `keep` of those [`list`](Self::list) shows (damaged
    /// ones are left alone), then the files no remaining backup holds.
    ///
    /// # Errors
    /// `Error::Io` naming the file that cannot be removed, or the directory that cannot be
    /// synced. The backups whose metadata was removed are gone; a file left behind is removed by
    /// the next purge or open.
    pub fn purge_old(&mut self, keep: usize) -> Result<()> {
        let ids: Vec<BackupId> = self.backups.keys().copied().collect();
        let doomed = ids.len().saturating_sub(keep);
        self.remove_backups(&ids[..doomed])
    }

    /// Deletes backup `id` (whole or damaged), then the files no other backup holds.
    ///
    /// # Errors
    /// `Error::InvalidArgument` if there is no backup `id`; otherwise as
    /// [`purge_old`](Self::purge_old).
    pub fn delete(&mut self, id: BackupId) -> Result<()> {
        if !self.backups.contains_key(&id) && !self.damaged.contains_key(&id) {
            return Err(self.no_such_backup(id));
        }
        self.remove_backups(&[id])
    }

    /// Removes the metadata of backups `ids`, makes that durable, then removes the shared files
    /// no remaining backup names: a power cut in between leaves files no backup names (removed
    /// later), never a backup naming a missing file.
    fn remove_backups(&mut self, ids: &[BackupId]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        for &id in ids {
            match self.fs.remove_file(&meta_path(&self.dir, id)) {
                Ok(()) => {}
                Err(Error::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            self.backups.remove(&id);
            self.damaged.remove(&id);
        }
        self.fs.sync_dir(&self.dir)?;
        self.collect_garbage()?;
        Ok(())
    }

    /// Backup `id`'s metadata, if it reads whole.
    ///
    /// # Errors
    /// `Error::Corruption` naming its metadata file if that is damaged; `Error::InvalidArgument`
    /// if there is no backup `id`.
    fn whole(&self, id: BackupId) -> Result<&BackupMeta> {
        if let Some(meta) = self.backups.get(&id) {
            return Ok(meta);
        }
        match self.damaged.get(&id) {
            Some(e) => Err(e.duplicate()),
            None => Err(self.no_such_backup(id)),
        }
    }

    fn no_such_backup(&self, id: BackupId) -> Error {
        Error::InvalidArgument(format!("no backup {id} in {}", self.dir.display()))
    }
}
