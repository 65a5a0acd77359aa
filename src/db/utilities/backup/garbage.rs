//! Removing what no backup needs: the temporaries of an interrupted copy, and the shared files no
//! backup's metadata names (left by a backup that never got its metadata, or by a purge
//! interrupted after its metadata went).

use std::collections::HashSet;

use super::names::{parse_backup_name, BackupFileKind};
use super::BackupEngine;
use crate::error::{Error, Result};
use crate::fs::io_at;

impl BackupEngine {
    /// Removes every temporary and, unless a backup's metadata is damaged (its files are then
    /// unknown, so none may go), every shared file no backup names. Returns how many files it
    /// removed.
    ///
    /// # Errors
    /// `Error::Io` naming the directory or the file that cannot be listed or removed.
    pub(super) fn collect_garbage(&self) -> Result<usize> {
        let named: HashSet<String> = self
            .backups
            .values()
            .flat_map(|b| b.files.iter().map(|f| f.shared_name()))
            .collect();
        let keep_shared = !self.damaged.is_empty();
        if keep_shared {
            log::warn!(
                "backups in {}: damaged metadata ({:?}); no shared file is removed until they are \
                 deleted",
                self.dir.display(),
                self.damaged.keys().collect::<Vec<_>>()
            );
        }
        let mut removed = 0;
        for entry in std::fs::read_dir(&self.dir).map_err(io_at(&self.dir))? {
            let entry = entry.map_err(io_at(&self.dir))?;
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let garbage = match parse_backup_name(&name) {
                Some(BackupFileKind::Temp) => true,
                Some(BackupFileKind::Shared(_)) => !keep_shared && !named.contains(&name),
                Some(BackupFileKind::Meta(_)) | None => false,
            };
            if garbage && entry.file_type().map_err(io_at(&entry.path()))?.is_file() {
                match self.fs.remove_file(&entry.path()) {
                    Ok(()) => removed += 1,
                    Err(Error::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(removed)
    }
}
