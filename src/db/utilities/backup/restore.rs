//! Restoring a backup: its files copied into an empty directory under their store names, each
//! checked against its recorded checksum on the way, then CURRENT, last.

use std::path::{Path, PathBuf};

use super::copy::Source;
use super::held::check_crc;
use super::{BackupEngine, BackupId};
use crate::db::version::filename::{current_path, current_temp_path};
use crate::db::version::manifest::set_current;
use crate::error::{Error, Result};
use crate::fs::{io_at, FileSystem};

impl BackupEngine {
    /// Writes backup `id` out as a store in `target`, which must be missing (it is created) or
    /// an empty directory. [`Db::open`](crate::Db::open) then opens it: it holds every write the
    /// backup holds, in every keyspace it had, with their options; opening replays the WAL
    /// prefixes of the backup into tables.
    ///
    /// Each file is checked against the size and CRC-32 the backup recorded as it is copied, and
    /// fsynced; the directory is fsynced, then CURRENT is written (a temporary, fsynced, renamed,
    /// the directory fsynced). Until then the target is no store: an interrupted restore leaves
    /// files without CURRENT, which `Db::open` refuses as `Error::Corruption` rather than mistake
    /// for a store; remove the directory and restore again. A restore that fails removes what it
    /// wrote.
    ///
    /// # Errors
    /// - `Error::InvalidArgument` if there is no backup `id`, or `target` is empty, a file, or a
    ///   directory holding anything;
    /// - `Error::Corruption` naming the backup's file that is missing, of the wrong size or
    ///   checksum, or its metadata file if that is damaged;
    /// - `Error::Io` naming the file that cannot be read or written.
    pub fn restore(&self, id: BackupId, target: impl AsRef<Path>) -> Result<()> {
        self.restore_through(id, target.as_ref(), &FileSystem::default())
    }

    /// [`restore`](Self::restore) through the fault-injection layer `injector` (which follows
    /// `target`), for the crate's power-cut tests. Not an API.
    ///
    /// # Errors
    /// As [`restore`](Self::restore).
    #[cfg(feature = "__fault-injection")]
    #[doc(hidden)]
    pub fn restore_with_faults(
        &self,
        id: BackupId,
        target: impl AsRef<Path>,
        injector: crate::fs::fault_injection::FaultInjector,
    ) -> Result<()> {
        self.restore_through(
            id,
            target.as_ref(),
            &FileSystem::with_faults(Some(injector)),
        )
    }

    fn restore_through(&self, id: BackupId, target: &Path, fs: &FileSystem) -> Result<()> {
        let meta = self.whole(id)?;
        let manifest = meta.manifest_number().ok_or_else(|| {
            Error::corruption(&super::names::meta_path(&self.dir, id), "names no MANIFEST")
        })?;
        let created = prepare_target(fs, target)?;
        let mut made = Vec::new();
        let result = (|| {
            let mut buf = Vec::new();
            for f in &meta.files {
                let (from, source) = self.open_held(id, f)?;
                let to = target.join(&f.name);
                made.push(to.clone());
                let source = Source::File {
                    file: &source,
                    path: &from,
                    len: f.size,
                };
                check_crc(&from, id, f, source.write_to(fs, &to, &mut buf)?)?;
            }
            // Every file durable under its name before CURRENT makes the directory a store.
            fs.sync_dir(target)?;
            made.push(current_temp_path(target));
            made.push(current_path(target));
            set_current(fs, target, manifest)
        })();
        if let Err(e) = &result {
            log::error!(
                "restore of backup {id} from {} into {} failed: {e}",
                self.dir.display(),
                target.display()
            );
            for path in made.iter().rev() {
                let _ = fs.remove_file(path);
            }
            if let Some(dir) = created {
                let _ = fs.remove_dir(&dir);
            }
        }
        result
    }
}

/// Makes `target` ready for a restore: an empty directory, created (and its entry made durable)
/// if missing. Returns the directory if it created it.
///
/// # Errors
/// `Error::InvalidArgument` for an empty path, a file, or a directory holding anything.
fn prepare_target(fs: &FileSystem, target: &Path) -> Result<Option<PathBuf>> {
    if target.as_os_str().is_empty() {
        return Err(Error::InvalidArgument(
            "the restore's target is an empty path: name a directory".into(),
        ));
    }
    match std::fs::metadata(target) {
        Ok(m) if !m.is_dir() => Err(Error::InvalidArgument(format!(
            "restore target {} is not a directory",
            target.display()
        ))),
        Ok(_) => {
            let mut entries = std::fs::read_dir(target).map_err(io_at(target))?;
            if entries.next().is_some() {
                return Err(Error::InvalidArgument(format!(
                    "restore target {} is not empty: a restore writes only into an empty \
                     directory",
                    target.display()
                )));
            }
            Ok(None)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            fs.create_dir_all(target)?;
            if let Some(parent) = target.parent().filter(|p| !p.as_os_str().is_empty()) {
                fs.sync_dir(parent)?;
            }
            Ok(Some(target.to_path_buf()))
        }
        Err(e) => Err(io_at(target)(e)),
    }
}
